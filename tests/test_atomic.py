"""``bat.atomic``: links are written through, read-only files refused, modes kept."""

import os
import stat

import pytest

from bat.atomic import PRIVATE, ReadOnlyFile, check_writable, write_text_atomic


def mode(path):
    return stat.S_IMODE(path.stat().st_mode)


def test_new_file_gets_the_mode_asked_for(tmp_path):
    write_text_atomic(tmp_path / "secret", "k=v\n", mode=PRIVATE)
    assert mode(tmp_path / "secret") == 0o600


def test_existing_file_keeps_its_mode(tmp_path):
    path = tmp_path / "shared"
    path.write_text("old")
    os.chmod(path, 0o640)
    write_text_atomic(path, "new", mode=PRIVATE)
    assert path.read_text() == "new" and mode(path) == 0o640


def test_a_chain_of_links_is_written_through_to_its_target(tmp_path):
    (tmp_path / "store").mkdir()
    target = tmp_path / "store" / "real.env"
    target.write_text("old")
    os.chmod(target, 0o604)
    (tmp_path / "middle").symlink_to(target)
    link = tmp_path / ".env"
    link.symlink_to("middle")
    write_text_atomic(link, "new", follow_links=True)
    assert link.is_symlink() and os.readlink(link) == "middle"
    assert (tmp_path / "middle").is_symlink()
    assert target.read_text() == "new" and mode(target) == 0o604
    # The temporary file went beside the target and is gone.
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == ["real.env"]


def test_by_default_a_link_is_replaced_and_its_target_left_alone(tmp_path):
    """A link planted in a folder bat writes (a run folder) leads no write elsewhere."""
    outside = tmp_path / "outside"
    outside.write_text("victim")
    os.chmod(outside, 0o400)  # read-only or not, the link is what is replaced
    (tmp_path / "run").mkdir()
    link = tmp_path / "run" / "summary.json"
    link.symlink_to(outside)
    write_text_atomic(link, "{}", mode=PRIVATE)
    assert not link.is_symlink() and link.read_text() == "{}" and mode(link) == PRIVATE
    assert outside.read_text() == "victim"


@pytest.mark.parametrize("bits", [0o400, 0o444, 0o000])
def test_read_only_files_are_refused_unless_allowed(tmp_path, bits):
    path = tmp_path / "locked"
    path.write_text("old")
    os.chmod(path, bits)
    with pytest.raises(ReadOnlyFile, match=f"mode {bits:04o}") as refused:
        write_text_atomic(path, "new")
    assert refused.value.exit_code == 2
    assert path.read_bytes() == b"old" and mode(path) == bits
    write_text_atomic(path, "new", allow_read_only=True)
    assert path.read_text() == "new" and mode(path) == bits


def test_a_read_only_target_behind_a_link_is_refused(tmp_path):
    target = tmp_path / "real"
    target.write_text("old")
    os.chmod(target, 0o400)
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(ReadOnlyFile):
        check_writable(tmp_path / "link")
    check_writable(tmp_path / "missing")  # a file not there yet is fine
