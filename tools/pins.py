"""The version check the reference generators under tools/ share: refuse to run (one line on stderr,
exit status 2) unless every package of a requirements file is installed at exactly its pinned version
(a local suffix such as torch 2.15.0+cu132 or +cpu counts as the pinned version)."""

import importlib.metadata
import os
import sys


def check_versions(requirements, program="generate.py"):
    """The pins of `requirements` (name == version lines, # comments) as a dict, after the check."""
    pins = {}
    with open(requirements) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                name, version = line.split("==")
                pins[name.strip()] = version.strip()
    bad = []
    for name, want in pins.items():
        try:
            have = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            have = "missing"
        if have.split("+", 1)[0] != want:
            bad.append(f"{name} {have} (pinned {want})")
    if bad:
        where = os.path.relpath(requirements, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        print(f"{program}: installed versions differ from {where}: " + ", ".join(bad), file=sys.stderr)
        sys.exit(2)
    return pins
