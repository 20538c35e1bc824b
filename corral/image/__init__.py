"""Image: images and their data, wire-compatible with OpenStack Glance (Image API v2)."""
