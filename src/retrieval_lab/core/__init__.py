"""What every pipeline stage imports: errors, atomic writes, the params schema, the BEIR data model.

Every stage in dvc.yaml lists this folder as a dependency, so keep it to code that all of
them share; code only some stages use lives beside it and is listed by those stages alone.
"""
