"""Errors shared by the torch and the torch-free (ONNX) inference paths; importing this costs nothing."""


class CheckpointError(RuntimeError):
    """A missing, corrupt or foreign checkpoint file (or ONNX export)."""


class SynthesisError(RuntimeError):
    """A sentence could not be made into acceptable audio: non-finite samples (never written), or an AR
    attention failure that survived its retries when the caller asked failures to be errors."""


class MelConfigMismatchError(ValueError):
    """Two components were built for different mel definitions."""


class UntrustedCheckpointError(CheckpointError):
    """A checkpoint (or vocoder) file that would need code to load: a pickle naming a function or class beyond
    plain data, or a config naming something other than this project's model classes.  Refused unrun."""
