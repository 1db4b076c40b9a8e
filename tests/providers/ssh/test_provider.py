"""The ``ssh`` provider's targets: configured hosts, then the SSH config's aliases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from jupyter_client.kernelspec import _is_valid_kernel_name
from traitlets import TraitError

from jupyter_remote_hw.providers import KERNEL_NAME_PREFIX, SSHProvider, Target
from jupyter_remote_hw.providers.ssh.provider import DEFAULT_HARDWARE
from jupyter_remote_hw.providers.target import gib_label
from jupyter_remote_hw.transport import TransportManager


def provider(
    config: Path | None, hosts: list[dict[str, Any]] | None = None, **traits: Any
) -> SSHProvider:
    """An SSHProvider reading ``config`` (none: the default files) with ``hosts``."""
    files = [str(config)] if config is not None else []
    return SSHProvider(
        transport=TransportManager(ssh_config_files=files), hosts=hosts or [], **traits
    )


def write_config(tmp_path: Path, text: str) -> Path:
    """An ssh_config file with ``text``."""
    path = tmp_path / "ssh_config"
    path.write_text(text)
    return path


def test_configured_hosts_first_then_config_aliases(tmp_path: Path) -> None:
    config = write_config(tmp_path, "Host alias-one\nHost alias-two\n")
    ssh = provider(
        config,
        [
            {
                "host": "gpu-a",
                "hardware": "A10G 24GB",
                "python": "/opt/py/bin/python",
                "root": "/scratch/me",
            },
            {"host": "me@gpu-b.example.com"},
        ],
    )
    targets = ssh.targets()
    assert [t.name for t in targets] == [
        "ssh-gpu-a",
        "ssh-me-gpu-b.example.com",
        "ssh-alias-one",
        "ssh-alias-two",
    ]
    assert targets[0] == Target(
        name="ssh-gpu-a",
        provider="ssh",
        where="gpu-a",
        hardware="A10G 24 GiB",
        host="gpu-a",
        python="/opt/py/bin/python",
        root="/scratch/me",
        workdir="~",
    )
    # A configured host without labels gets the defaults.
    assert targets[1].hardware == DEFAULT_HARDWARE == "SSH host"
    assert targets[1].host == targets[1].where == "me@gpu-b.example.com"
    assert targets[1].python == "python3"
    assert targets[1].root is None
    # SSH config aliases carry only the default label.
    assert targets[2] == Target(
        name="ssh-alias-one",
        provider="ssh",
        where="alias-one",
        hardware="SSH host",
        host="alias-one",
        workdir="~",
    )


def test_working_directory_per_host_and_for_all(tmp_path: Path) -> None:
    ssh = provider(
        write_config(tmp_path, "Host alias-one\n"),
        [
            {"host": "gpu-a", "workdir": "/scratch/me/notebooks"},
            {"host": "gpu-b"},
        ],
    )
    ssh.workdir = "~/work"
    assert [t.workdir for t in ssh.targets()] == ["/scratch/me/notebooks", "~/work", "~/work"]


def test_name_key_sets_the_target_name(tmp_path: Path) -> None:
    ssh = provider(write_config(tmp_path, ""), [{"host": "10.1.2.3", "name": "Lab Box"}])
    (target,) = ssh.targets()
    assert target.name == "ssh-lab-box"
    assert target.host == target.where == "10.1.2.3"


def test_code_hosting_aliases_are_excluded(tmp_path: Path) -> None:
    config = write_config(tmp_path, "Host github.com\nHost gitlab.com bitbucket.org\nHost box\n")
    assert [t.name for t in provider(config).targets()] == ["ssh-box"]


def test_exclude_hosts_is_configurable(tmp_path: Path) -> None:
    config = write_config(tmp_path, "Host github.com\nHost private\n")
    ssh = provider(config, exclude_hosts=["private"])
    assert [t.host for t in ssh.targets()] == ["github.com"]


def test_configured_host_is_not_listed_twice(tmp_path: Path) -> None:
    config = write_config(tmp_path, "Host gpu-a other\nHost Renamed\n")
    ssh = provider(
        config,
        [
            {"host": "gpu-a", "hardware": "H100 80GB"},
            {"host": "renamed", "name": "renamed"},
        ],
    )
    targets = ssh.targets()
    assert [t.name for t in targets] == ["ssh-gpu-a", "ssh-renamed", "ssh-other"]
    assert targets[0].hardware == "H100 80 GiB"
    # "Renamed" slugs to an existing target name: the configured one wins.
    assert targets[1].host == "renamed"


def test_include_ssh_config_off_lists_only_configured_hosts(tmp_path: Path) -> None:
    config = write_config(tmp_path, "Host from-config\n")
    ssh = provider(config, [{"host": "configured"}], include_ssh_config=False)
    assert [t.name for t in ssh.targets()] == ["ssh-configured"]


def test_default_config_file_is_home_ssh_config(home: Path) -> None:
    (home / ".ssh" / "config").write_text("Host from-home\n")
    assert [t.host for t in provider(None).targets()] == ["from-home"]


def test_no_config_and_no_hosts_gives_no_targets() -> None:
    assert provider(None).targets() == []


@pytest.mark.parametrize(
    ("host", "name"),
    [
        ("GPU-Box", "ssh-gpu-box"),
        ("me@Host.Example.COM", "ssh-me-host.example.com"),
        ("my box", "ssh-my-box"),
        ("a:b/c\\d", "ssh-a-b-c-d"),
        ("under_score", "ssh-under_score"),
        (".leading-dot.", "ssh-leading-dot"),
        ("@@@", "ssh-host"),
    ],
)
def test_target_names_are_kernelspec_safe_slugs(host: str, name: str) -> None:
    (target,) = provider(None, [{"host": host}]).targets()
    assert target.name == name
    assert target.host == host
    assert _is_valid_kernel_name(target.kernel_name)


def test_quoted_alias_becomes_a_safe_name(tmp_path: Path) -> None:
    config = write_config(tmp_path, 'Host "Spaced Out"\n')
    (target,) = provider(config).targets()
    assert target.name == "ssh-spaced-out"
    assert target.host == "Spaced Out"
    assert _is_valid_kernel_name(target.kernel_name)


@pytest.mark.parametrize(
    ("hosts", "problem"),
    [
        ([{"hardware": "A10G"}], "has no 'host'"),
        ([{"host": ""}], "has no 'host'"),
        ([{"host": 22}], "has no 'host'"),
        ([{"host": "ok"}, {"hostname": "typo"}], "{'hostname': 'typo'} has no 'host'"),
    ],
)
def test_entry_without_host_is_refused(hosts: list[dict[str, Any]], problem: str) -> None:
    with pytest.raises(TraitError) as err:
        SSHProvider(hosts=hosts)
    assert "SSHProvider.hosts" in str(err.value)
    assert problem in str(err.value)


def test_unknown_key_is_refused_and_named() -> None:
    with pytest.raises(TraitError) as err:
        SSHProvider(hosts=[{"host": "gpu-a", "gpu": "A10G", "label": "x"}])
    message = str(err.value)
    assert "'gpu-a'" in message
    assert "['gpu', 'label']" in message
    assert (
        "['authorized_keys', 'hardware', 'hibernate_after', 'hibernate_on_host', 'host', "
        "'name', 'python', 'root', 'workdir']" in message
    )


def test_invalid_hosts_refused_on_assignment_too() -> None:
    ssh = SSHProvider(hosts=[{"host": "fine"}])
    with pytest.raises(TraitError):
        ssh.hosts = [{"host": "fine", "port": 22}]
    assert ssh.hosts == [{"host": "fine"}]


def test_non_dict_entry_is_refused() -> None:
    with pytest.raises(TraitError):
        SSHProvider(hosts=["gpu-a"])


def test_target_labels() -> None:
    target = Target(
        name="ssh-gpu-a", provider="ssh", where="gpu-a", hardware="A10G 24GB", host="gpu-a"
    )
    assert target.display_name == "Python 3 · A10G 24GB · gpu-a"
    assert KERNEL_NAME_PREFIX == "remote-hw-"
    assert target.kernel_name == "remote-hw-ssh-gpu-a"


def test_provider_targets_have_matching_labels(tmp_path: Path) -> None:
    config = write_config(tmp_path, "Host alias\n")
    ssh = provider(config, [{"host": "gpu-a", "hardware": "A10G 24GB"}])
    assert [(t.display_name, t.kernel_name) for t in ssh.targets()] == [
        ("Python 3 · A10G 24 GiB · gpu-a", "remote-hw-ssh-gpu-a"),
        ("Python 3 · SSH host · alias", "remote-hw-ssh-alias"),
    ]


@pytest.mark.parametrize(
    ("label", "shown"),
    [
        ("A10G 24GB", "A10G 24 GiB"),
        ("2 × A100 80 GB", "2 × A100 80 GiB"),
        ("L4 24GiB", "L4 24 GiB"),
        ("A100-SXM4-80GB", "A100-SXM4-80GB"),
        ("4 CPUs", "4 CPUs"),
        ("SSH host", "SSH host"),
    ],
)
def test_configured_labels_say_memory_in_gib(label: str, shown: str) -> None:
    assert gib_label(label) == shown
