"""Analysis: a run directory's records (read, never written) to figures and the summary dict.

In a notebook::

    from perfkit import analysis
    analysis.trials_frame(run_dir)        # one row per trial: variant, status, timed steps, median
    analysis.steps_frame(run_dir)         # one row per reported step
    analysis.comparisons_frame(run_dir)   # B/A ratio, CI, p, verdict per variant and metric
    analysis.read_summary(run_dir)        # summary.json as a dict
    case, summary = analysis.summarize_run(run_dir)   # the summary.json a run would write
    analysis.compare(a_trials, b_trials)  # ratio of medians with a hierarchical bootstrap CI
    analysis.run_attribution(run_dir)     # where each variant's change in step time goes, with CIs
"""

from perfkit.common.lazy import exports

__all__ = ["trials_frame", "steps_frame", "comparisons_frame", "read_summary", "summarize_run", "compare",
           "run_attribution"]
__getattr__, __dir__ = exports(__name__, {"trials_frame": "frames", "steps_frame": "frames",
                                          "comparisons_frame": "frames", "read_summary": "frames",
                                          "summarize_run": "summary",
                                          "compare": "stats", "run_attribution": "attribution"})
