"""The coding loop: coders' marks read back as labels, a reader adapted on them, and calibrated confidence."""
