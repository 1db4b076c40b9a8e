"""Server tests run the pytest-jupyter server on the test's own loop; the REST API tests
reuse the provisioner tests' server config, kernel starter and kernel channels."""

from ..provisioner.conftest import (  # noqa: F401 (fixtures)
    channels,
    hosts,
    jp_server_config,
    remote_root,
    start_kernel,
)
from ..serverloop import jp_asyncio_loop  # noqa: F401 (fixture)
