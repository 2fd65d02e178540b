"""tmagen: validated TMA tensor maps, swizzle models and CUDA code for Hopper and Blackwell."""

__version__ = "0.1.0"
