"""The option the commands that run artifacts share: refuse artifacts carrying native code."""
from __future__ import annotations

import argparse


def add_native_argument(p: argparse.ArgumentParser) -> None:
    from emulator.native_policy import NO_NATIVE_ENV

    p.add_argument("--no-native-code", action="store_true",
                   help="refuse an artifact that carries native code (GpSimd C++ kernels), as "
                   f"{NO_NATIVE_ENV}=1 does: for artifacts from someone you do not trust")


def native_setting(args: argparse.Namespace) -> bool | None:
    """load_artifact's allow_native: False with --no-native-code, else as the environment says."""
    return False if args.no_native_code else None
