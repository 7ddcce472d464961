"""Launcher hand-off: Megatron-LM arguments, torchtitan overrides, DeepSpeed JSON, device mesh."""
