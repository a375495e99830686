"""Profiles of executions: per-engine timelines of estimated cycles (emulator.cost) and the
emulator's own wall time; `Profile.summary()` and `Profile.to_chrome_trace()`."""
from emulator.profile.profile import InstructionTotal, Profile
from emulator.profile.recorder import Event, HostSpan, Recorder

__all__ = ["Event", "HostSpan", "InstructionTotal", "Profile", "Recorder"]
