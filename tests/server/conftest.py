"""Server tests run the pytest-jupyter server on the test's own loop."""

from ..serverloop import jp_asyncio_loop  # noqa: F401 (fixture)
