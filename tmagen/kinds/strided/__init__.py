"""The strided kernels: plain vectorised loads and stores for the layouts TMA cannot address."""
