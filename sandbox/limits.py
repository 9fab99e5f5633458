"""Resource limits of one sandboxed run (and the defaults of a compile step)."""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Limits(BaseModel):
    """What one run may use. Every limit is enforced even when cgroups are missing (rlimits, harness)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    wall_time_s: float = Field(5.0, gt=0, le=3600, description="wall clock; then the whole process tree is killed")
    cpu_time_s: float | None = Field(None, gt=0, le=3600, description="RLIMIT_CPU; default: wall_time_s")
    memory_mb: int = Field(512, ge=16, le=1 << 20, description="cgroup memory limit; address space gets headroom")
    max_processes: int = Field(32, ge=1, le=4096, description="cgroup pids limit and RLIMIT_NPROC")
    max_output_bytes: int = Field(1 << 20, ge=1, description="per stream (stdout, stderr); more ends the run")
    max_file_bytes: int = Field(16 << 20, ge=1 << 20, description="RLIMIT_FSIZE; also caps collected files")
    tmpfs_mb: int = Field(64, ge=1, le=1 << 16, description="size of the private writable work dir")
    max_open_files: int = Field(64, ge=8, le=1 << 16, description="RLIMIT_NOFILE")

    @model_validator(mode="after")
    def _cpu_not_above_wall(self) -> Limits:
        if self.cpu_time_s is not None and self.cpu_time_s > self.wall_time_s * 64:
            raise ValueError("cpu_time_s is far above wall_time_s; the wall clock would stop the run first")
        return self

    @property
    def cpu_seconds(self) -> int:
        """Whole seconds for RLIMIT_CPU (the kernel counts whole seconds)."""
        return max(1, math.ceil(self.cpu_time_s if self.cpu_time_s is not None else self.wall_time_s))

    @property
    def address_space_mb(self) -> int:
        """RLIMIT_AS: the cgroup limit is the real memory bound; AS only stops one runaway mapping.

        Interpreters and thread stacks reserve far more address space than they touch, hence the headroom.
        """
        return self.memory_mb * 2 + 512


# gcc's cc1plus alone maps a few hundred MB; a compile gets its own, roomier limits.
COMPILE_LIMITS = Limits(
    wall_time_s=30.0, memory_mb=1536, max_processes=16, max_file_bytes=64 << 20, tmpfs_mb=256, max_open_files=256
)
