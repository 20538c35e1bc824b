"""The Image service's configuration options (upstream Glance's names).

``[image_database] connection`` is the image database (Glance's own is
``[database] connection``, which Corral's Compute already uses for its
default cell).  The ``[DEFAULT]`` options (``image_size_cap``,
``user_storage_quota``, ``image_member_quota``, ``image_property_quota``,
``image_tag_quota``, ``limit_param_default``, ``api_limit_max``,
``enabled_import_methods``, ``hashing_algorithm``, ``node_staging_uri``),
``[image_format]`` and ``[import_filtering_opts]`` mean what they mean in
glance-api.conf.  ``[glance_store]`` is glance_store's own group: its
options are registered by glance_store itself, so every store it supports
is configured exactly as for Glance.
"""

from __future__ import annotations

import glance_store
from oslo_config import cfg

from corral.core.config import database_opts, sqlite_url

DATABASE_OPTS = database_opts(
    "Database URL for the Image service; an embedded SQLite file under state_path when unset."
)

DEFAULT_OPTS = [
    cfg.IntOpt("image_size_cap", default=1099511627776, min=1,
               help="Largest image, in bytes, that can be uploaded or imported (default 1 TiB)."),
    cfg.StrOpt("user_storage_quota", default="0",
               help="Total size of the images of one project, as a number of bytes or with a unit "
               "(B, KB, MB, GB, TB); 0 means unlimited."),
    cfg.IntOpt("image_member_quota", default=128, help="Members per image; negative means unlimited."),
    cfg.IntOpt("image_property_quota", default=128,
               help="Additional properties per image; negative means unlimited."),
    cfg.IntOpt("image_tag_quota", default=128, help="Tags per image; negative means unlimited."),
    cfg.IntOpt("limit_param_default", default=25, min=1,
               help="Images in a list answer when the request names no limit."),
    cfg.IntOpt("api_limit_max", default=1000, min=1, help="Most images in one list answer."),
    cfg.ListOpt("enabled_import_methods", default=["glance-direct", "web-download"],
                item_type=cfg.types.String(choices=["glance-direct", "web-download"]),
                help="Interoperable image import methods offered."),
    cfg.StrOpt("hashing_algorithm", default="sha512",
               help="hashlib algorithm of the os_hash_value computed while image data streams in."),
    cfg.StrOpt("node_staging_uri", default="file://$state_path/image-staging",
               help="file:// URL of the directory where glance-direct imports stage data. "
               "Every API process must see the same directory."),
    cfg.BoolOpt("show_image_direct_url", default=False,
                help="Show the store location of an image as direct_url (may reveal store details)."),
]

LIMIT_OPTS = [
    cfg.IntOpt("image_count_total", default=-1,
               help="Images a project may own (any status); -1 means unlimited."),
    cfg.IntOpt("image_size_total", default=-1,
               help="MiB of image data a project may store; -1 means unlimited."),
    cfg.IntOpt("image_stage_total", default=-1,
               help="MiB of data a project may have staged for import; -1 means unlimited."),
    cfg.IntOpt("image_count_uploading", default=-1,
               help="Images of a project that may be uploading or importing at once; -1 means unlimited."),
]

IMAGE_FORMAT_OPTS = [
    cfg.ListOpt("container_formats",
                default=["ami", "ari", "aki", "bare", "ovf", "ova", "docker", "compressed"],
                help="Accepted container_format values."),
    cfg.ListOpt("disk_formats",
                default=["ami", "ari", "aki", "vhd", "vhdx", "vmdk", "raw", "qcow2", "vdi", "iso", "ploop"],
                help="Accepted disk_format values."),
    cfg.ListOpt("vmdk_allowed_types", default=["streamOptimized", "monolithicSparse"],
                help="VMDK create-types accepted (single-file variants only, so no extent names a host file)."),
    cfg.BoolOpt("require_image_format_match", default=True,
                help="Refuse uploads whose data does not match their disk_format."),
    cfg.ListOpt("gpt_safety_checks_nonfatal", default=[],
                help="GPT safety checks (mbr, gptmbr) whose failure only logs a warning."),
]

IMPORT_FILTERING_OPTS = [
    cfg.ListOpt("allowed_schemes", default=["http", "https"], item_type=cfg.types.String(quotes=True),
                help="URL schemes web-download may fetch; when set, disallowed_schemes is ignored."),
    cfg.ListOpt("disallowed_schemes", default=[], item_type=cfg.types.String(quotes=True),
                help="URL schemes web-download refuses."),
    cfg.ListOpt("allowed_hosts", default=[], item_type=cfg.types.HostAddress(),
                help="Hosts web-download may fetch from (names or addresses); when set, disallowed_hosts is "
                "ignored, and these hosts may also be loopback, link-local or private addresses."),
    cfg.ListOpt("disallowed_hosts", default=[], item_type=cfg.types.HostAddress(),
                help="Hosts web-download refuses."),
    cfg.ListOpt("allowed_ports", default=[80, 443], item_type=cfg.types.Integer(min=1, max=65535),
                help="Ports web-download may connect to; when set, disallowed_ports is ignored."),
    cfg.ListOpt("disallowed_ports", default=[], item_type=cfg.types.Integer(min=1, max=65535),
                help="Ports web-download refuses."),
    cfg.BoolOpt("allow_internal_addresses", default=False,
                help="Let web-download connect to loopback, link-local, private and other non-public "
                "addresses of hosts that allowed_hosts does not name. Off, an import cannot be used to "
                "reach services on the cloud's own networks."),
    cfg.IntOpt("max_redirects", default=5, min=0,
               help="HTTP redirects web-download follows; each target is checked like the first URL."),
    cfg.FloatOpt("timeout", default=60.0, min=1.0,
                 help="Seconds web-download waits to connect, and between two blocks of data."),
]


WRITER_OPTS = [
    cfg.FloatOpt("lease_duration", default=60.0, min=1.0,
                 help="Seconds after which an upload, staging or import whose process stopped renewing its "
                 "lease is taken to be dead: its half-written data is removed and the image is queued again."),
    cfg.FloatOpt("recovery_interval", default=30.0, min=0.1,
                 help="How often each API process looks for such dead writers."),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(DATABASE_OPTS, group="image_database")
    conf.register_opts(DEFAULT_OPTS)
    conf.register_opts(LIMIT_OPTS, group="image_limits")
    conf.register_opts(IMAGE_FORMAT_OPTS, group="image_format")
    conf.register_opts(IMPORT_FILTERING_OPTS, group="import_filtering_opts")
    conf.register_opts(WRITER_OPTS, group="corral_image")
    glance_store.register_opts(conf)
    # Glance's defaults point at /var/lib/glance; Corral keeps its state
    # under the data directory.
    conf.set_default("filesystem_store_datadir", "$state_path/images", group="glance_store")
    # Data moves in 1 MiB pieces rather than glance_store's 64 KiB: each piece
    # costs a hand-over to the server's event loop on its way to the client.
    conf.set_default("filesystem_store_chunk_size", 1024 * 1024, group="glance_store")


def database_url(conf: cfg.ConfigOpts) -> str:
    return conf.image_database.connection or sqlite_url(conf, "image.sqlite")
