"""The `.neff` artifact: format constants, writer, reader, and its error (docs/artifact-format.md)."""
from emulator.artifact.errors import ArtifactError
from emulator.artifact.reader import Artifact, read_artifact, read_bytes
from emulator.artifact.writer import ArtifactContents, KernelPayload, write_artifact

__all__ = ["Artifact", "ArtifactContents", "ArtifactError", "KernelPayload", "read_artifact", "read_bytes",
           "write_artifact"]
