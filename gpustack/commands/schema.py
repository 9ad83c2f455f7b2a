"""`gpustack schema`: print the JSON Schema of a config file (gpustack.config.schema)."""

from __future__ import annotations

from gpustack.commands import common
from gpustack.commands.common import echo

app = common.application()


@app.command("schema")
def run(debug: common.Debug = False) -> int:
    """Print the JSON Schema of the GPUStack config file."""
    from gpustack.config.schema import schema_text

    echo(schema_text(), nl=False)
    return 0
