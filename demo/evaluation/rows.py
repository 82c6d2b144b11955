"""Result tables kept on disk (``summary.csv``, the mask sweep's CSV, the Results tab's runs): a
run's new rows take the place of its old ones, every other row stays. One rule for every table."""

import pandas as pd


def upsert(old: pd.DataFrame, new: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """``old`` less its rows whose ``keys`` some row of ``new`` has, then ``new`` (in that order)."""
    if old.empty:
        return new.reset_index(drop=True)
    replaced = pd.MultiIndex.from_frame(old[keys].astype(str)).isin(pd.MultiIndex.from_frame(new[keys].astype(str)))
    return pd.concat([old[~replaced], new], ignore_index=True)
