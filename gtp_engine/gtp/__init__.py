"""The GTP front end: protocol.py frames text, commands.py gives the commands their Go meaning, analysis.py formats
search snapshots for the analysis commands."""
