from tmagen.cli import entrypoint

entrypoint()
