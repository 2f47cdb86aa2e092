# cdef API of the entry_walk kernel: none yet. The walk is called from Python (the
# file-records layer); kafkastore/_pure/entry_walk.py documents it and the Python API
# is in entry_walk.pyi.
