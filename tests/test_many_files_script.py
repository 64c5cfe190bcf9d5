"""Smoke test of scripts/many_files.py: the log generator is seeded, and `time` runs the
command line over files (level 1: quick) and reports the per-file cost."""

from __future__ import annotations

import sys

from conftest import load_script


def test_logs_are_seeded_and_time_reports_per_file_cost(tmp_path):
    many = load_script("many_files")
    assert many.log_lines(3, 20) == many.log_lines(3, 20) != many.log_lines(4, 20)
    files = []
    for k in range(3):
        files.append(tmp_path / f"part-{k}.log")
        files[-1].write_text("\n".join(many.log_lines(k, 30)) + "\n")
    row = many.time_files([sys.executable, "-m", "rwkvzip"], files, None, 1)
    assert row["files"] == 3 and 0 < row["compressed_bytes"] < row["raw_bytes"]
    assert row["compress_all_s"] > 0 and "decompress_per_file_ms" in row
