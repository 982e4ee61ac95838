"""The device path the studies used on GPU machines: studies/device_path/README.md."""
