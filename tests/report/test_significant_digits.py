"""One rule for a figure shown to n significant digits (``perfkit.common.digits``), counts and bytes alike: its
trailing zeros are shown, for they are digits it is known to, and a figure that is a whole number below 10^n is
shown whole, for nothing was rounded off it. Bytes printed "0.819 MiB" (3 digits read) beside "0.7974 MiB",
where a count printed "2.40e+07"."""

from perfkit.common.digits import bytes_text, significant_text


def test_a_byte_figure_keeps_its_trailing_zeros_as_a_count_does():
    # by hand: 858752 / 2**20 = 0.818970..., to 4 digits 0.8190; 2**20 + 2**10 = 1.000977 MiB, to 4 digits 1.001
    assert bytes_text(858752) == "0.8190 MiB"
    assert bytes_text((1 << 20) + (1 << 10)) == "1.001 MiB"
    # 12 MiB and 2**30 + 1 B: 12.00000095 MiB to 4 digits 12.00; 1.0000000009 GiB, 1.000
    assert bytes_text(12 * (1 << 20) + 1) == "12.00 MiB" and bytes_text((1 << 30) + 1) == "1.000 GiB"
    assert significant_text(24000000) == "2.40e+07" and significant_text(0.5) == "0.500"
    assert significant_text(1234.5, 4) == "1234" and bytes_text(1023.5 * (1 << 20)) == "1024 MiB"


def test_a_whole_figure_below_its_digits_is_shown_whole():
    # nothing rounded off: 1 GiB, 12 MiB exactly, 0 B, a count of 12
    assert bytes_text(1 << 30) == "1 GiB" and bytes_text(12 << 20) == "12 MiB" and bytes_text(0) == "0 MiB"
    assert significant_text(12) == "12" and significant_text(0) == "0" and significant_text(100.0) == "100"
    assert significant_text(1e7, 1) == "1e+07"
