"""Bare Metal configuration options (upstream Ironic names)."""

from __future__ import annotations

from oslo_config import cfg

from corral.core.config import database_opts, sqlite_url
from corral.core.service_client import client_opts, register_client_opts

DATABASE_OPTS = database_opts(
    "Database URL for Bare Metal; "
    "an embedded SQLite file under state_path when unset."
)

DEFAULT_OPTS = [
    cfg.ListOpt(
        "enabled_hardware_types",
        default=["fake-hardware", "redfish"],
        help="Hardware types conductors load and advertise.",
    ),
    cfg.ListOpt(
        "enabled_boot_interfaces",
        default=["fake", "redfish-virtual-media"],
        help="Boot interfaces nodes may use; a node without one gets the first its hardware type "
        "supports among these.",
    ),
    cfg.ListOpt(
        "enabled_deploy_interfaces",
        default=["fake", "direct", "ramdisk"],
        help="Deploy interfaces nodes may use; a node without one gets the first its hardware type "
        "supports among these.",
    ),
    cfg.ListOpt(
        "enabled_inspect_interfaces",
        default=["fake", "agent", "no-inspect"],
        help="Inspect interfaces nodes may use; a node without one gets the first its hardware type "
        "supports among these (fake-hardware: fake, redfish: no-inspect; 'agent' is in-band inspection).",
    ),
    cfg.StrOpt(
        "webserver_verify_ca",
        default="True",
        help="TLS verification of image downloads over https: True, False, or the path of a CA bundle.",
    ),
    cfg.StrOpt(
        "isolinux_bin",
        default="/usr/lib/ISOLINUX/isolinux.bin",
        help="isolinux.bin used to make BIOS-bootable ISO images from a kernel and a ramdisk.",
    ),
    cfg.StrOpt(
        "ldlinux_c32",
        help="ldlinux.c32 for those images; searched in the usual syslinux locations when unset.",
    ),
    cfg.StrOpt(
        "default_portgroup_mode",
        default="active-backup",
        help="Bonding mode of port groups created without one.",
    ),
]

CONDUCTOR_OPTS = [
    cfg.BoolOpt(
        "automated_clean",
        default=True,
        deprecated_name="clean_nodes",
        deprecated_group="conductor",
        help="Run automated cleaning when a node is made available (provide) and when an "
        "instance is torn down. Manual cleaning is available either way.",
    ),
    cfg.FloatOpt("heartbeat_interval", default=10, min=0.1, help="Seconds between conductor heartbeats."),
    cfg.FloatOpt(
        "heartbeat_timeout",
        default=60,
        min=1,
        help="A conductor whose last heartbeat is older than this many seconds is considered dead; "
        "its nodes move to the other conductors.",
    ),
    cfg.IntOpt("workers_pool_size", default=100, min=1, help="Long-running tasks a conductor runs at once."),
    cfg.IntOpt(
        "workers_backlog",
        default=0,
        min=0,
        help="Tasks that may wait for a free worker; beyond that the API answers 503.",
    ),
    cfg.FloatOpt(
        "sync_power_state_interval",
        default=60,
        help="Seconds between power state synchronisations with the hardware (0 disables).",
    ),
    cfg.FloatOpt(
        "check_provision_state_interval",
        default=60,
        help="Seconds between checks for nodes stuck in a transient state (0 disables).",
    ),
    cfg.FloatOpt(
        "clean_step_poll_interval",
        default=10,
        help="Seconds between checks of clean steps running on the hardware ('clean wait'; 0 disables).",
    ),
    cfg.IntOpt(
        "deploy_callback_timeout",
        default=1800,
        min=0,
        help="Seconds a node may stay in 'wait call-back' without the agent calling back before the "
        "deployment fails (0: no limit).",
    ),
    cfg.FloatOpt(
        "check_deploy_timeouts_interval",
        default=60,
        help="Seconds between checks for deployments whose agent did not call back in time (0 disables).",
    ),
    cfg.IntOpt(
        "inspect_wait_timeout",
        default=1800,
        min=0,
        help="Seconds a node may stay in 'inspect wait' (the agent has not sent its inventory) before "
        "inspection fails (0: no limit). Checked every check_deploy_timeouts_interval seconds.",
    ),
    cfg.IntOpt(
        "clean_callback_timeout",
        default=1800,
        min=0,
        help="Seconds a node may stay in 'clean wait' before cleaning fails (0: no limit).",
    ),
    cfg.IntOpt(
        "rescue_callback_timeout",
        default=1800,
        min=0,
        help="Seconds a node may stay in 'rescue wait' without the agent calling back before the rescue fails "
        "(0: no limit).",
    ),
    cfg.FloatOpt(
        "check_rescue_timeouts",
        default=60,
        help="Seconds between checks for rescues whose agent did not call back in time (0 disables).",
    ),
    cfg.StrOpt(
        "rescue_password_hash_algorithm",
        default="sha256",
        choices=["sha256", "sha512"],
        help="Algorithm of the hash of the rescue password the agent is given (the plain password never leaves "
        "the conductor).",
    ),
    cfg.FloatOpt(
        "check_allocations_interval",
        default=60,
        help="Seconds between checks for allocations left in progress by conductors that stopped; they are "
        "taken over and finished (0 disables: such allocations then stay 'allocating').",
    ),
    cfg.IntOpt(
        "power_state_change_timeout",
        default=60,
        min=2,
        help="Seconds to wait for the hardware to reach a requested power state.",
    ),
    cfg.StrOpt("conductor_group", default="", help="Group of this conductor (nodes with the same group)."),
    cfg.IntOpt(
        "node_locked_retry_attempts",
        default=3,
        min=0,
        help="Times to retry taking a node lock held by another task before answering 409.",
    ),
    cfg.FloatOpt("node_locked_retry_interval", default=0.2, min=0, help="Seconds between node lock retries."),
    cfg.StrOpt(
        "deploy_kernel",
        help="Image service UUID, http(s):// or file:// URL of the kernel of the agent ramdisk, for nodes whose "
        "driver_info names no deploy_kernel (see 'corral baremetal build-ramdisk').",
    ),
    cfg.StrOpt(
        "deploy_ramdisk",
        help="Image service UUID, http(s):// or file:// URL of the initramfs of the agent ramdisk, for nodes whose "
        "driver_info names no deploy_ramdisk.",
    ),
    cfg.StrOpt(
        "rescue_kernel",
        help="Image service UUID, http(s):// or file:// URL of the kernel of the agent ramdisk booted for rescue, "
        "for nodes whose driver_info names no rescue_kernel.",
    ),
    cfg.StrOpt(
        "rescue_ramdisk",
        help="Image service UUID, http(s):// or file:// URL of the initramfs of the agent ramdisk booted for "
        "rescue, for nodes whose driver_info names no rescue_ramdisk.",
    ),
    cfg.ListOpt(
        "file_url_allowed_paths",
        default=["/var/lib/ironic", "/shared/html", "/templates", "/opt/cache/files", "/vagrant"],
        help="Directories file:// image URLs may point into; any other local file is refused.",
    ),
]

JSON_RPC_OPTS = [
    cfg.StrOpt("host_ip", default="127.0.0.1",
               help="Address the conductor's JSON-RPC server listens on. Any address other than a loopback one "
               "needs auth_strategy = http_basic (the server refuses to start otherwise)."),
    cfg.PortOpt("port", default=8089, help="Port of the conductor's JSON-RPC server (0 picks a free one)."),
    cfg.FloatOpt("timeout", default=60, help="Seconds an API waits for a conductor's JSON-RPC answer."),
    # Server side.
    cfg.StrOpt(
        "auth_strategy",
        default="noauth",
        choices=[("noauth", "no authentication (loopback addresses only)"),
                 ("http_basic", "HTTP basic authentication against http_basic_auth_user_file")],
        help="Authentication of JSON-RPC calls, on the conductor's server and in the API's client.",
    ),
    cfg.StrOpt("http_basic_auth_user_file", default="/etc/corral/htpasswd-json-rpc",
               help="Apache-format htpasswd file (bcrypt hashes) of the users allowed to call conductors, "
               "when auth_strategy = http_basic."),
    cfg.BoolOpt("use_ssl", default=False,
                help="Serve JSON-RPC over TLS with [ssl] cert_file and key_file; callers then use https."),
    # Client side (the API calling conductors).
    cfg.StrOpt("http_basic_username", default="",
               help="User name the API sends to conductors; required when auth_strategy = http_basic."),
    cfg.StrOpt("http_basic_password", default="", secret=True,
               help="Password the API sends to conductors; required when auth_strategy = http_basic."),
    cfg.StrOpt("cafile", help="CA bundle verifying conductors' TLS certificates (default: the system's)."),
    cfg.StrOpt("certfile", help="Client certificate presented to conductors over TLS."),
    cfg.StrOpt("keyfile", help="Private key of certfile."),
    cfg.BoolOpt("insecure", default=False, help="Do not verify conductors' TLS certificates."),
]

# The server certificate, in the group upstream's services read it from.
SSL_OPTS = [
    cfg.StrOpt("cert_file", help="Certificate (PEM) the JSON-RPC server presents when [json_rpc] use_ssl is set."),
    cfg.StrOpt("key_file", help="Private key (PEM) of cert_file."),
]

API_OPTS = [
    cfg.StrOpt("public_endpoint", help="Public URL prefix for links in Bare Metal responses."),
]

# Upstream's [api] options of the agent's endpoints.
RAMDISK_API_OPTS = [
    cfg.IntOpt("ramdisk_heartbeat_timeout", default=300, min=1,
               help="Seconds within which the agent must heartbeat (it heartbeats at 30-60% of this)."),
    cfg.BoolOpt("restrict_lookup", default=True,
                help="Answer the agent's lookup only for nodes in states where an agent is expected."),
]

AGENT_OPTS = [
    cfg.IntOpt("command_timeout", default=60, min=1, help="Seconds to wait for the agent's answer to a command."),
    cfg.BoolOpt("allow_md5_checksum", default=False, help="Let the agent verify images by MD5 checksums."),
    cfg.BoolOpt("stream_raw_images", default=True, help="Let the agent stream raw images onto the disk."),
    cfg.BoolOpt(
        "deploy_forces_oob_reboot",
        default=False,
        help="Power the node off through the power interface after the image is written instead of asking "
        "the agent to shut the machine down (node driver_info 'deploy_forces_oob_reboot' wins).",
    ),
    cfg.IntOpt(
        "post_deploy_get_power_state_retries",
        default=6,
        min=0,
        help="Times the power state is read again, after the agent was asked to power the machine off at the "
        "end of a deployment, before the conductor powers it off itself.",
    ),
    cfg.FloatOpt(
        "post_deploy_get_power_state_retry_interval",
        default=5,
        min=0,
        help="Seconds between those power state reads.",
    ),
    cfg.BoolOpt(
        "enable_bios_bootloader_install",
        default=False,
        help="Let the agent install a boot loader (grub-install) for partition images, passed to it at lookup; "
        "off by default, as upstream (CVE-2026-43003): the agent then refuses to install one.",
    ),
    cfg.IntOpt("command_wait_attempts", default=100, min=1,
               help="Times the status of a long agent command (image.install_bootloader) is read."),
    cfg.FloatOpt("command_wait_interval", default=6, min=0, help="Seconds between those reads."),
]

PXE_OPTS = [
    cfg.StrOpt("default_ephemeral_format", default="ext4",
               help="File system of the ephemeral partition of a partition image, when instance_info names none."),
]

FAKE_OPTS = [
    cfg.FloatOpt("power_delay", default=0, min=0, help="Seconds the fake power interface takes per action."),
    cfg.FloatOpt("bios_delay", default=0, min=0, help="Seconds each fake BIOS clean step takes."),
    cfg.FloatOpt("vendor_delay", default=0, min=0, help="Seconds the fake vendor clean step takes."),
]

REDFISH_OPTS = [
    cfg.IntOpt("connection_attempts", default=5, min=1, help="Attempts to reach a Redfish BMC."),
    cfg.IntOpt("connection_retry_interval", default=1, min=0, help="Seconds between attempts."),
    cfg.FloatOpt("power_poll_interval", default=1, min=0.05,
                 help="Seconds between power state reads while waiting for a power change."),
    cfg.StrOpt("kernel_append_params", default="nofb vga=normal",
               help="Kernel arguments of ISO images built from a kernel and a ramdisk: of the agent ramdisk "
               "(unless the node's instance_info or driver_info kernel_append_params replaces them; "
               "%default% there stands for this value), and of a ramdisk deployment, before the node's own "
               "ramdisk_kernel_arguments."),
]


DEPLOY_OPTS = [
    cfg.BoolOpt(
        "fast_track",
        default=False,
        help="Keep the agent running after cleaning and deploy through it without rebooting, when it "
        "heartbeated within fast_track_timeout (the machine stays powered on while available).",
    ),
    cfg.IntOpt(
        "fast_track_timeout",
        default=300,
        min=0,
        max=300,
        help="Seconds since its last heartbeat within which an agent counts as running for fast track.",
    ),
    cfg.StrOpt(
        "http_url",
        help="URL at which the agent on the machines fetches the files under http_root (for example "
        "http://192.0.2.1:8088): images for the direct deploy; also BMCs, unless external_http_url is set. "
        "When unset, the conductor's own file server's address is used.",
    ),
    cfg.StrOpt(
        "external_http_url",
        help="URL at which BMCs fetch the files under http_root (virtual media ISO images), when they reach "
        "the conductor by another address than the machines do. Defaults to http_url; a node's "
        "driver_info/external_http_url wins.",
    ),
    cfg.StrOpt(
        "external_callback_url",
        help="URL of the Bare Metal API for the agent of machines booted from virtual media, given to it as "
        "ipa-api-url (for example http://192.0.2.1:6385/baremetal). Unset: [baremetal_api] public_endpoint.",
    ),
    cfg.StrOpt(
        "http_root",
        default="$state_path/httpboot",
        help="Directory the conductor publishes boot ISO images in, served at http_url.",
    ),
    cfg.BoolOpt(
        "http_server",
        default=True,
        help="Serve http_root from the conductor's own HTTP file server (off when another web server "
        "serves http_root at http_url).",
    ),
    cfg.HostAddressOpt("http_server_host", default="127.0.0.1",
                       help="Address the conductor's file server listens on."),
    cfg.PortOpt("http_server_port", default=0,
                help="Port of the conductor's file server; 0 picks a free one (set a fixed port for firewalls)."),
    cfg.StrOpt(
        "http_image_subdir",
        default="agent_images",
        help="Subdirectory of http_root where the conductor publishes images from the Image service for the "
        "agent of the direct deploy to download (at http_url/<subdir>/<node uuid>).",
    ),
    cfg.StrOpt(
        "ramdisk_image_download_source",
        default="local",
        choices=[
            ("local", "Boot ISOs are downloaded, verified and cached by the conductor and served from http_url."),
            ("http", "A boot_iso is handed to the BMC at its own URL (no checksum verification)."),
        ],
        help="Where the BMC fetches a prebuilt boot ISO from.",
    ),
    cfg.StrOpt("iso_master_path", default="$state_path/master_iso_images",
               help="Directory of the cache of downloaded images."),
    cfg.IntOpt("iso_cache_size", default=20480, min=0,
               help="Maximum size (in MiB) of the image cache, including images in use."),
    cfg.IntOpt("iso_cache_ttl", default=10080, min=0,
               help="Minutes an unused cached image is kept."),
    cfg.IntOpt("image_download_timeout", default=60, min=1,
               help="Seconds without progress after which an image download fails."),
    cfg.StrOpt(
        "default_boot_mode",
        default="uefi",
        choices=["uefi", "bios"],
        help="Boot mode of nodes whose properties/capabilities and instance_info name none.",
    ),
]


# Upstream's [deploy] priorities of the agent's erase steps (unset: the agent's own).
AGENT_DEPLOY_OPTS = [
    cfg.IntOpt("erase_devices_priority", min=0,
               help="Priority of the agent's erase_devices clean step (0 disables it in automated cleaning)."),
    cfg.IntOpt("erase_devices_metadata_priority", min=0,
               help="Priority of the agent's erase_devices_metadata clean step (0 disables it in automated "
               "cleaning)."),
]


# In-band inspection through the agent (upstream's [inspector] group).
INSPECTOR_OPTS = [
    cfg.StrOpt(
        "add_ports",
        default="pxe",
        choices=[
            ("all", "A port for every NIC with a MAC address."),
            ("active", "A port for every NIC with an IP address."),
            ("pxe", "A port for the NIC the machine booted from (every active NIC when the agent cannot tell)."),
            ("disabled", "No ports are created."),
        ],
        help="Which of the machine's NICs inspection creates ports for.",
    ),
    cfg.StrOpt(
        "keep_ports",
        default="all",
        choices=[
            ("all", "Keep every existing port."),
            ("present", "Delete the ports whose MAC address the machine does not have."),
            ("added", "Delete every port except those of the NICs chosen by add_ports."),
        ],
        help="Which of the node's existing ports inspection keeps.",
    ),
    cfg.StrOpt("default_hooks", default="ramdisk-error,validate-interfaces,ports,architecture",
               help="The inspection hooks always wanted (upstream's defaults)."),
    cfg.StrOpt(
        "hooks",
        default="$default_hooks,cpus,memory,root-device",
        help="Inspection hooks run on the agent's data, in order. Also known: boot-mode. cpus, memory and "
        "root-device set the properties cpus, memory_mb and local_gb that Compute and allocations read.",
    ),
    cfg.BoolOpt("disk_partitioning_spacing", default=True,
                help="Leave 1 GiB of the root disk out of local_gb for partitioning."),
    cfg.BoolOpt("power_off", default=True, help="Power the machine off once inspection finished."),
    cfg.StrOpt("extra_kernel_params", default="",
               help="Kernel parameters added to the agent ramdisk's command line when it boots for inspection."),
    cfg.StrOpt(
        "callback_endpoint_override",
        help="The URL of the Bare Metal API the agent posts its inventory to, without /v1/continue_inspection "
        "(default: [deploy] external_callback_url, else [baremetal_api] public_endpoint).",
    ),
]


# Enrolling machines that post an inventory but match no node (upstream's [auto_discovery] group).
AUTO_DISCOVERY_OPTS = [
    cfg.BoolOpt(
        "enabled",
        default=False,
        mutable=True,
        help="Enroll a machine whose agent posts its inventory to /v1/continue_inspection but matches no node: "
        "a new node in enroll with the driver below, its ports and inventory. Any machine that reaches the "
        "(unauthenticated) endpoint becomes a node. The driver must be set.",
    ),
    cfg.StrOpt("driver", mutable=True,
               help="Hardware type of the nodes auto-discovery enrolls. Required when auto-discovery is enabled."),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(DATABASE_OPTS, group="baremetal_database")
    conf.register_opts(DEFAULT_OPTS)
    conf.register_opts(CONDUCTOR_OPTS, group="conductor")
    conf.register_opts(JSON_RPC_OPTS, group="json_rpc")
    conf.register_opts(SSL_OPTS, group="ssl")
    conf.register_opts(API_OPTS, group="baremetal_api")
    conf.register_opts(FAKE_OPTS, group="fake")
    conf.register_opts(RAMDISK_API_OPTS, group="api")
    conf.register_opts(AGENT_OPTS, group="agent")
    conf.register_opts(PXE_OPTS, group="pxe")
    conf.register_opts(AGENT_DEPLOY_OPTS, group="deploy")
    conf.register_opts(REDFISH_OPTS, group="redfish")
    conf.register_opts(DEPLOY_OPTS, group="deploy")
    conf.register_opts(INSPECTOR_OPTS, group="inspector")
    conf.register_opts(AUTO_DISCOVERY_OPTS, group="auto_discovery")
    # Images given by UUID or glance:// come from the Image service (Compute registers the same group).
    register_client_opts(conf, "glance", client_opts("Image", "/image", retries=0))


def database_url(conf: cfg.ConfigOpts) -> str:
    return conf.baremetal_database.connection or sqlite_url(conf, "baremetal.sqlite")
