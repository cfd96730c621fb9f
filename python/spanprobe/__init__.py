"""spanprobe from Python (docs/python.md): write activation dumps of PyTorch models for
`spanprobe analyze`, and read its reports as numpy arrays.

    import spanprobe
    spanprobe.capture(model, input_ids, "dump.h5")   # needs torch (imported only then)
    # $ spanprobe analyze dump.h5 --out report.h5
    r = spanprobe.read_report("report.h5")
"""
from .report import Metric, Report, read_report

__version__ = "0.1.0"
__all__ = ["capture", "read_report", "Report", "Metric", "__version__"]


def capture(model, input_ids, path, **options):
    """Writes the activation dump of model on input_ids to path (spanprobe.dump.capture)."""
    from .dump import capture as run  # torch is imported here, not by `import spanprobe`
    return run(model, input_ids, path, **options)
