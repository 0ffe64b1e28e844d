from croft.app.cli import entrypoint

entrypoint()
