"""The control credential: who may drain a worker (pure code: the token check and the builders)."""
import base64

from rewardpool_operator.pool import builders, owned, sizing
from rewardpool_worker.contract import CONTROL_TOKEN_DIR, CONTROL_TOKEN_FILE, control_header
from rewardpool_worker.runtime.control import ControlAuth
from tests.factories import pool


def test_token_check_401_without_403_wrong_200_right(tmp_path):
    f = tmp_path / "token"
    f.write_text("s3cret-token\n")  # a trailing newline (kubectl create secret --from-file) is not part of it
    auth = ControlAuth(f)
    assert auth.check(None)[0] == 401
    assert auth.check("")[0] == 401
    assert auth.check("Basic s3cret-token")[0] == 401
    assert auth.check("Bearer ")[0] == 401
    assert auth.check("Bearer s3cret-tokem")[0] == 403
    assert auth.check("Bearer s3cret-token-longer")[0] == 403
    assert auth.check(control_header("s3cret-token")["Authorization"]) == (200, "")


def test_rotation_is_picked_up_without_a_restart(tmp_path):
    f = tmp_path / "token"
    f.write_text("old")
    auth = ControlAuth(f)
    assert auth.check("Bearer old")[0] == 200
    f.write_text("new")
    assert auth.check("Bearer old")[0] == 403
    assert auth.check("Bearer new")[0] == 200


def test_no_token_file_refuses_every_call(tmp_path):
    auth = ControlAuth(tmp_path / "missing")
    code, why = auth.check("Bearer anything")
    assert code == 403 and "missing" in why
    (tmp_path / "empty").write_text("")
    assert ControlAuth(tmp_path / "empty").check("Bearer ")[0] == 401
    assert ControlAuth(tmp_path / "empty").check("Bearer x")[0] == 403


def test_control_secret_is_owned_labelled_and_round_trips():
    p = pool()
    secret = owned.control_secret(p, "tok-123")
    assert secret["metadata"]["name"] == "p-control" and secret["metadata"]["namespace"] == "ns"
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    labels = secret["metadata"]["labels"]
    assert labels["app.kubernetes.io/component"] == "control-token" and labels["rewardpool.io/pool"] == "p"
    assert base64.b64decode(secret["data"]["token"]) == b"tok-123"
    assert owned.control_token(secret) == "tok-123"
    # A user's Secret that happens to have the name is not taken for ours.
    foreign = {"metadata": {"name": "p-control", "labels": {}}, "data": secret["data"]}
    assert owned.control_token(foreign) is None
    assert owned.control_token({"metadata": {"labels": labels}, "data": {}}) is None


def test_worker_pod_mounts_the_token_read_only_and_refreshable():
    p = pool()
    pod = builders.pod_template(p, sizing.compute(p.spec))
    vol = next(v for v in pod["spec"]["volumes"] if v["name"] == "control")
    assert vol["secret"]["secretName"] == "p-control" and vol["secret"]["defaultMode"] == 0o440
    mount = next(m for m in pod["spec"]["containers"][0]["volumeMounts"] if m["name"] == "control")
    assert mount == {"name": "control", "mountPath": CONTROL_TOKEN_DIR, "readOnly": True}  # no subPath
    assert CONTROL_TOKEN_FILE == f"{CONTROL_TOKEN_DIR}/{vol['secret']['items'][0]['path']}"
    # The token is not in the pod spec (nor in the template hash): rotating it rolls nothing.
    assert "tok" not in str(pod["spec"]["containers"][0]["env"])
    assert all(o["kind"] != "Secret" for o in owned.desired_objects(p, sizing.compute(p.spec)))
