import csv


def read(path):
    # TODO: accept semicolon-separated files
    with open(path) as fh:
        return [row for row in csv.reader(fh)]
