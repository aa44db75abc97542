from tests.conftest import make_multilabel, train, upload_csv


def test_train_and_predict_labels(client):
    X, Y = make_multilabel()
    ds = upload_csv(client, X, Y)
    job = train(client, "mlknn", ds["id"], "ml-smoke", k=5)
    assert job["model"] == {"name": "ml-smoke", "version": 1}
    r = client.post("/predict", json={"model": "ml-smoke", "instances": X[:3].tolist()})
    assert r.status_code == 200, r.text
    assert len(r.json()["predictions"]) == 3
