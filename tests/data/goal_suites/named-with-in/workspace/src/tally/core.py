def total(amounts):
    # TODO: reject negative amounts
    return sum(amounts)
