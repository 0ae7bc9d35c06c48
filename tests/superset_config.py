# Apache Superset's configuration for the tests (tests/superset_env.py): its metadata in
# the SQLite file JM_SUPERSET_DB names; a fixed key (the tests' database holds no secret).
import os

SECRET_KEY = "jm-tests-only-superset-key-not-a-secret"
SQLALCHEMY_DATABASE_URI = "sqlite:///" + os.environ["JM_SUPERSET_DB"]
WTF_CSRF_ENABLED = False   # the test speaks to the REST API with a bearer token
RATELIMIT_ENABLED = False
