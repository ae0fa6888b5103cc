"""The index's lookups of Velero's data mover objects (rules/datasource/exposer.py): the DataUploads of Velero's
namespace, kept apart from webhook/state/index.py, which holds the lookups every review makes."""

from __future__ import annotations

from rules.model import Json


class DataMoverLookups:
    """Mixed into `ClusterIndex`: what it answers of the kinds webhook/state/kinds.py follows in Velero's
    namespace alone (a dictionary hit, like every lookup of the index)."""

    _objects: dict[str, dict[tuple[str, str], Json]]

    def data_upload(self, namespace: str, name: str) -> Json | None:
        return self._objects["DataUpload"].get((namespace, name))
