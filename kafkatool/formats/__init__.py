"""Pure byte codecs for Kafka's formats: no files, sockets or clocks here.

Every decoder takes bytes (or a memoryview) and raises a subclass of
:class:`kafkatool.formats.errors.FormatError` carrying the byte position of the
problem within the buffer it was given.
"""
