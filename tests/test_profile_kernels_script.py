"""Smoke test of scripts/profile_kernels.py: the network parts of a small GDN, with the table."""

from __future__ import annotations

import json

from conftest import load_script


def test_profile_reports_every_part_with_its_floor(tmp_path, capsys):
    """(Not named profile.py: on sys.path, that would shadow the standard library's
    profile module, which cProfile and torch import.)"""
    profile = load_script("profile_kernels")
    out = tmp_path / "p.json"
    text = tmp_path / "t.txt"
    text.write_bytes(b"the network parts of a small GDN, timed on a little text\n" * 200)
    profile.main([str(text), "--configs", "gdn:32x1", "--no-levels", "--json", str(out)])
    report = json.loads(out.read_text())
    rows = report["networks"][0]["rows"]
    assert [r["part"] for r in rows[:len(profile.GDN_PARTS)]] == profile.GDN_PARTS
    assert all(r["us"] > 0 and r["floor_us"] > 0 for r in rows)
    whole = rows[-1]
    assert whole["part"] == "whole forward step"
    # the parts are the forward's own work: together about the whole step, not far off
    assert 0.5 * whole["us"] < sum(r["us"] for r in rows[:-2]) < 2.0 * whole["us"]
    assert "× floor" in capsys.readouterr().out
