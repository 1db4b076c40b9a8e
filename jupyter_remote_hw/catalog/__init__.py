"""The hardware catalog: AWS instance types with their GPUs and prices, and queries over them."""

from .catalog import Catalog, user_catalog_path
from .entries import SHIPPED_CATALOG, CatalogEntry, CatalogFileError, read_catalog, write_catalog
from .query import CatalogQueryError, search, wants_spot

__all__ = [
    "SHIPPED_CATALOG",
    "Catalog",
    "CatalogEntry",
    "CatalogFileError",
    "CatalogQueryError",
    "read_catalog",
    "search",
    "user_catalog_path",
    "wants_spot",
    "write_catalog",
]
