"""spanprobe.report: an analysis report (docs/formats.md, "Report") as numpy arrays.

    import spanprobe
    r = spanprobe.read_report("report.h5")
    cos = r.metrics["similarity"]["cosine"]           # Metric: .values (numpy), .units, .shape_desc, ...
    r.summary["similarity"]["adjacent_cosine_mean"]   # the JSON summary's scalars, by analyzer
    r.skipped                                         # {analyzer: why it did not run}

Reads the HDF5 report with h5py and its JSON summary beside it; needs numpy and h5py.
"""
import json
import os
from dataclasses import dataclass, field

import h5py
import numpy as np

FORMAT = "spanprobe-report"
MAJOR = 1


@dataclass
class Metric:
    """One array of a report: its values, their units, what each axis is, and what it measures."""
    values: np.ndarray
    units: str
    shape_desc: str
    description: str

    @property
    def shape(self):
        return self.values.shape


@dataclass
class Report:
    path: str
    metrics: dict = field(default_factory=dict)      # {analyzer: {name: Metric}}
    summary: dict = field(default_factory=dict)      # {analyzer: {key: number}}, the JSON summary's "metrics"
    skipped: dict = field(default_factory=dict)      # {analyzer: reason}
    provenance: dict = field(default_factory=dict)   # the /provenance attributes (input, options, tool)


def _text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def read_report(path):
    """The report at path, with its summary (path with .json for .h5). ValueError when it is not a
    spanprobe report of a major version this reader knows."""
    with h5py.File(path, "r") as f:
        fmt, version = _text(f.attrs.get("format", "")), _text(f.attrs.get("format_version", ""))
        if fmt != FORMAT:
            raise ValueError(f"{path}: format {fmt!r}, expected {FORMAT!r}")
        if not version.split(".")[0].isdigit() or int(version.split(".")[0]) > MAJOR:
            raise ValueError(f"{path}: format_version {version!r} is newer than this reader ({MAJOR}.x)")
        report = Report(path)
        if "provenance" in f:
            report.provenance = {k: _text(v) if isinstance(v, (bytes, str)) else v
                                 for k, v in f["provenance"].attrs.items()}
        for analyzer, group in f.get("metrics", {}).items():
            report.metrics[analyzer] = {
                name: Metric(np.asarray(d[()], dtype=np.float64), _text(d.attrs.get("units", "")),
                             _text(d.attrs.get("shape_desc", "")), _text(d.attrs.get("description", "")))
                for name, d in group.items()}
        for analyzer, group in f.get("skipped", {}).items():
            report.skipped[analyzer] = _text(group.attrs.get("reason", ""))
    summary = os.path.splitext(path)[0] + ".json"
    if os.path.exists(summary):
        with open(summary) as s:
            report.summary = json.load(s).get("metrics", {})
    return report
