"""The GTP front end: protocol.py frames text, commands.py gives the commands their Go meaning, analyze_lines.py
reads the analyze commands' requests and writes search snapshots as their info lines."""
