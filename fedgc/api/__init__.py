"""The implementation of fedgc's public Python API (``import fedgc``; docs/api.md). Import the names
from ``fedgc`` itself: the modules here may move."""
