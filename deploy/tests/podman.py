"""Podman for the container test: building the published Containerfile's
final stage on a base made of this machine's files, and running it.

No image registry is reachable from CI, so neither the Rust builder nor the
distroless base can be pulled. The Containerfile's final stage only copies
files into its base (no RUN), so it is built here exactly as written, after
a stand-in build stage that holds the already built binary, on a base made
``FROM scratch`` of what distroless/cc gives the binary: the shared
libraries ``ldd`` names, CA certificates, and /etc/passwd with the nonroot
user (65532). What the test then checks is the published layout: paths,
user, entrypoint, configuration path, health check and stop signal.

This machine's podman needs runc and cgroupfs (crun refuses cgroups v1 in
hybrid mode) and explicit nofile and nproc limits (podman's defaults exceed
the sandbox's hard limits, which root may not raise here); all of that works
on any Linux, so it is always given.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional

REPO = Path(__file__).resolve().parents[2]
CONTAINERFILE = REPO / "Containerfile"

#: Global flags for every podman call (see the module doc).
PODMAN = ["podman", "--runtime", "runc", "--cgroup-manager=cgroupfs"]
#: Flags for every container run.
RUN_FLAGS = ["--network", "host", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096"]

#: distroless's nonroot user, which the Containerfile runs as.
NONROOT = 65532


class PodmanError(AssertionError):
    pass


def podman(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    """One podman command; its output as text. ``check``: fail with its
    stderr unless it exits 0."""
    done = subprocess.run(PODMAN + list(args), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout)
    if check and done.returncode != 0:
        raise PodmanError(f"podman {' '.join(args)}: exit {done.returncode}: {done.stderr.strip()}")
    return done


def inspect(kind: str, name: str) -> Dict[str, Any]:
    """``podman <kind> inspect NAME`` (kind: image or container), parsed."""
    got = json.loads(podman(kind, "inspect", name).stdout)
    assert isinstance(got, list) and len(got) == 1, got
    return got[0]


def with_prebuilt_binary(published: str) -> str:
    """The published Containerfile with its build stage replaced by one
    holding ./delayer at /out/delayer (where the build stage installs it),
    the global ARGs and the final stage as written."""
    # Cut at each FROM: [global ARGs, stage 1, ...].
    parts = re.split(r"(?m)^(?=FROM\s)", published)
    final = parts[-1]
    assert re.search(r"(?m)^RUN\s", final) is None, "the final stage must not RUN: the test builds it as written"
    assert "--from=build /out/delayer" in final, "the final stage copies /out/delayer from the build stage"
    return parts[0] + "FROM scratch AS build\nCOPY delayer /out/delayer\n\n" + final


def shared_libraries(binary: Path) -> List[Path]:
    """The files ``ldd`` says the binary loads (the dynamic loader too)."""
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=True, timeout=30).stdout
    found = []
    for line in out.splitlines():
        m = re.search(r"(?:=>\s*)?(/\S+)\s+\(0x", line)
        if m:
            found.append(Path(m.group(1)))
    assert any("libc.so" in p.name for p in found), out
    return found


class Images:
    """The base and the image, built once, removed by :meth:`remove`."""

    def __init__(self, workdir: Path, binary: Path) -> None:
        tag = uuid.uuid4().hex[:10]
        self.base = f"localhost/delayer-test-base:{tag}"
        self.image = f"localhost/delayer-test:{tag}"
        self._built: List[str] = []
        self._base(workdir / "base", binary)
        self._image(workdir / "image", binary)

    def _base(self, ctx: Path, binary: Path) -> None:
        root = ctx / "rootfs"
        for lib in shared_libraries(binary):
            dest = root / lib.relative_to("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(lib.resolve(), dest)
        etc = root / "etc"
        (etc / "ssl" / "certs").mkdir(parents=True, exist_ok=True)
        shutil.copy2("/etc/ssl/certs/ca-certificates.crt", etc / "ssl" / "certs" / "ca-certificates.crt")
        (etc / "passwd").write_text(f"root:x:0:0:root:/root:/sbin/nologin\n"
                                    f"nonroot:x:{NONROOT}:{NONROOT}:nonroot:/home/nonroot:/sbin/nologin\n")
        (etc / "group").write_text(f"root:x:0:\nnonroot:x:{NONROOT}:\n")
        (ctx / "Containerfile").write_text(
            "FROM scratch\nCOPY rootfs/ /\n"
            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
        )
        podman("build", "--pull=never", "--layers=false", "--format", "docker", "-t", self.base, str(ctx), timeout=300)
        self._built.append(self.base)

    def _image(self, ctx: Path, binary: Path) -> None:
        ctx.mkdir(parents=True)
        # Debug info is most of a debug build's size; the image needs none.
        subprocess.run(["objcopy", "--strip-debug", str(binary), str(ctx / "delayer")], check=True, timeout=60)
        (ctx / "deploy").mkdir()
        shutil.copy2(REPO / "deploy" / "delayer.container.conf", ctx / "deploy" / "delayer.container.conf")
        (ctx / "Containerfile").write_text(with_prebuilt_binary(CONTAINERFILE.read_text()))
        # docker format: OCI images have no HEALTHCHECK.
        podman("build", "--pull=never", "--layers=false", "--format", "docker", "--build-arg", f"RUNTIME={self.base}",
               "-t", self.image, "-f", str(ctx / "Containerfile"), str(ctx), timeout=300)
        self._built.append(self.image)

    def remove(self) -> None:
        for name in reversed(self._built):
            podman("rmi", "-f", name, check=False)
        self._built.clear()


class Container:
    """A detached container of ``image``, removed by :meth:`remove`."""

    def __init__(self, image: str, args: List[str], command: Optional[List[str]] = None) -> None:
        self.name = f"delayer-test-{uuid.uuid4().hex[:10]}"
        podman("run", "-d", "--name", self.name, *RUN_FLAGS, *args, image, *(command or []))

    def state(self) -> Dict[str, Any]:
        return inspect("container", self.name)["State"]

    def running(self) -> bool:
        return bool(self.state().get("Running"))

    def logs(self) -> str:
        done = podman("logs", self.name, check=False)
        return done.stdout + done.stderr

    def healthcheck(self) -> subprocess.CompletedProcess:
        """``podman healthcheck run``: exit 0 healthy, 1 unhealthy."""
        return podman("healthcheck", "run", self.name, check=False, timeout=60)

    def last_health_output(self) -> str:
        state = self.state()
        health = state.get("Healthcheck") or state.get("Health") or {}
        log = health.get("Log") or []
        return str(log[-1].get("Output", "")) if log else ""

    def remove(self) -> None:
        podman("rm", "-f", "-t", "0", self.name, check=False)
