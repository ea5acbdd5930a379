"""Trace file -> typed Arrow tables -> Parquet partitions. No analysis happens here."""

from tracelake.core.package_name import require_installed_name

require_installed_name(__name__, "tracelake.ingest")
