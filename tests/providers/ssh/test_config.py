"""``host_aliases`` lists the concrete Host aliases of ssh_config files and their includes."""

from __future__ import annotations

from pathlib import Path

import pytest

from jupyter_remote_hw.providers.ssh.config import host_aliases


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary home directory with an empty ``~/.ssh``; ``~`` expands to it."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    return home


def write(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` (creating its directory) and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_every_alias_of_a_host_line_in_order(tmp_path: Path) -> None:
    config = write(tmp_path / "config", "Host alpha beta\n  HostName 10.0.0.1\nHost gamma\n")
    assert host_aliases([config]) == ["alpha", "beta", "gamma"]


def test_equals_form_and_keyword_case(tmp_path: Path) -> None:
    config = write(
        tmp_path / "config",
        "Host=foo\nHost = bar\nHOST\tbaz\n  host=qux  \nHostName not-an-alias\n",
    )
    assert host_aliases([config]) == ["foo", "bar", "baz", "qux"]


def test_patterns_and_negations_are_left_out(tmp_path: Path) -> None:
    config = write(
        tmp_path / "config",
        "Host *\n  User me\nHost real *.corp !bad gpu? also-real\nHost %h\n",
    )
    assert host_aliases([config]) == ["real", "also-real"]


def test_quoted_names_lose_their_quotes(tmp_path: Path) -> None:
    config = write(tmp_path / "config", "Host \"my box\" 'other box' plain\n")
    assert host_aliases([config]) == ["my box", "other box", "plain"]


def test_unbalanced_quote_still_lists_the_words(tmp_path: Path) -> None:
    config = write(tmp_path / "config", 'Host "broken other\n')
    assert host_aliases([config]) == ['"broken', "other"]


def test_comments_and_blank_lines(tmp_path: Path) -> None:
    config = write(
        tmp_path / "config",
        "# Host commented\n"
        "   # Host indented-comment\n"
        "\n"
        "Host kept # trailing comment words\n"
        "Host second\t#another\n",
    )
    assert host_aliases([config]) == ["kept", "second"]


def test_match_blocks_give_no_aliases(tmp_path: Path) -> None:
    config = write(
        tmp_path / "config",
        'Match host matched exec "true"\n  User me\nMatch all\nHost after-match\n',
    )
    assert host_aliases([config]) == ["after-match"]


def test_relative_include_is_resolved_under_home_ssh(home: Path, tmp_path: Path) -> None:
    write(home / ".ssh" / "config.d" / "b.conf", "Host from-b\n")
    write(home / ".ssh" / "config.d" / "a.conf", "Host from-a\n")
    write(home / ".ssh" / "extra", "Host from-extra\n")
    # The including file lives elsewhere: relative paths still mean ~/.ssh.
    config = write(
        tmp_path / "elsewhere" / "config",
        "Host first\nInclude config.d/*.conf extra\nHost last\n",
    )
    assert host_aliases([config]) == ["first", "from-a", "from-b", "from-extra", "last"]


def test_tilde_include_expands_to_home(home: Path, tmp_path: Path) -> None:
    write(home / "other-ssh" / "hosts", "Host from-tilde\n")
    config = write(tmp_path / "config", "Include ~/other-ssh/hosts\n")
    assert host_aliases([config]) == ["from-tilde"]


def test_absolute_glob_include_in_sorted_order(home: Path, tmp_path: Path) -> None:
    conf_d = tmp_path / "conf.d"
    write(conf_d / "20-second.conf", "Host second\n")
    write(conf_d / "10-first.conf", "Host first\n")
    write(conf_d / "ignored.txt", "Host not-matched-by-glob\n")
    config = write(tmp_path / "config", f"Include={conf_d}/*.conf\nHost own\n")
    assert host_aliases([config]) == ["first", "second", "own"]


def test_nested_includes_are_followed(home: Path, tmp_path: Path) -> None:
    write(home / ".ssh" / "level2", "Host deep\n")
    write(home / ".ssh" / "level1", "Host middle\nInclude level2\n")
    config = write(tmp_path / "config", "Include level1\nHost top\n")
    assert host_aliases([config]) == ["middle", "deep", "top"]


def test_include_cycle_terminates(home: Path) -> None:
    config = write(home / ".ssh" / "config", "Host looped\nInclude config\n")
    assert host_aliases([config]) == ["looped"]


def test_include_of_missing_files_and_directories_is_skipped(home: Path, tmp_path: Path) -> None:
    (home / ".ssh" / "a-directory").mkdir()
    config = write(
        tmp_path / "config",
        f"Include nothing-here {tmp_path}/no/*.conf a-directory\nHost still-here\n",
    )
    assert host_aliases([config]) == ["still-here"]


def test_missing_files_are_skipped(tmp_path: Path) -> None:
    present = write(tmp_path / "present", "Host present\n")
    assert host_aliases([tmp_path / "missing", present, tmp_path / "also-missing"]) == ["present"]
    assert host_aliases([tmp_path / "missing"]) == []
    assert host_aliases([]) == []


def test_order_kept_and_duplicates_removed_across_files(tmp_path: Path) -> None:
    one = write(tmp_path / "one", "Host b a\nHost b\n")
    two = write(tmp_path / "two", "Host c a d\n")
    assert host_aliases([one, two]) == ["b", "a", "c", "d"]


def test_hash_inside_a_name_is_part_of_it(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text("Host foo#bar baz # a comment\n")
    assert host_aliases([config]) == ["foo#bar", "baz"]
