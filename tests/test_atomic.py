"""kvcore.atomic, the one way the toolkit writes a file: all or nothing, with the user's normal permissions."""

import os
import stat

import pytest

from kvcore.atomic import replacing, save_figure, user_file_mode, write_text


def test_a_failed_write_leaves_the_previous_file_and_no_temporary(tmp_path):
    target = write_text(tmp_path / "report.md", "old\n")
    for exc in (RuntimeError("disk full"), KeyboardInterrupt()):
        with pytest.raises(type(exc)):
            with replacing(target) as tmp, open(tmp, "w") as fh:
                fh.write("half of the new")
                raise exc
        assert target.read_text() == "old\n"
        assert sorted(os.listdir(tmp_path)) == ["report.md"]


def test_a_finished_write_replaces_with_the_mode_open_would_give(tmp_path):
    target = write_text(tmp_path / "a.json", "{}\n")
    write_text(target, "[]\n")
    assert target.read_text() == "[]\n"
    assert stat.S_IMODE(target.stat().st_mode) == user_file_mode() != 0o600


def test_figures_are_written_whole_and_without_timestamps(tmp_path):
    from matplotlib.figure import Figure

    fig = Figure()
    fig.add_subplot().plot([0, 1], [1, 0])
    png, svg = save_figure(fig, tmp_path / "new", "line")
    assert png.read_bytes().startswith(b"\x89PNG") and b"<dc:date>" not in svg.read_bytes()
    assert sorted(p.name for p in (tmp_path / "new").iterdir()) == ["line.png", "line.svg"]
