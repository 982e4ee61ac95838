"""ObjectiveSettings: the config produces it, ElectraPretrainer takes and serialises it whole, and a pretrainer
built through it has the weights and losses the per-keyword constructor gave (values recorded from it)."""
import dataclasses
import hashlib

import keras
import numpy as np
import pytest

from common.errors import InputError
from configs.pretraining_config import PretrainingConfig
from pretrain.builder import build_encoders, build_pretrainer
from configs.objective import ObjectiveSettings
from pretrain.pretrainer import ElectraPretrainer
from tests.model_fixtures import tiny_batch, tiny_config

# Recorded at commit 3f60e98 with the old keyword constructor (ElectraPretrainer(..., mask_prob=...,
# electra_objective=..., seed=...)): keras.utils.set_random_seed(config.seed), build_pretrainer(config), then
# compute_losses(tiny_batch(lengths=[16, 12, 9, 6]), training=True). "variables" hashes every weight's path,
# shape and trainability; "abs_weight_sum" sums |w| over all of them in float64. Re-recorded at 5e05853, where
# each variable got its own initializer draw (before it, build_pretrainer gave the values recorded at 3f60e98): the
# variables' hashes unchanged, the weight sums and losses those of the new draws.
RECORDED = {
    "electra": ({}, {
        "variables": "b173aaa5259652b4", "abs_weight_sum": 684.9168689934813, "total_loss": 39.45985412597656,
        "mlm_loss": 4.103511810302734, "disc_loss": 0.7071268558502197}),
    "mlm_only": ({"electra_objective": False}, {
        "variables": "ae4efd887abd9915", "abs_weight_sum": 514.2667729595705, "total_loss": 4.132781505584717,
        "mlm_loss": 4.132781505584717}),
    "electric_readme_spelling": ({"electra_objective": False, "electric_objective": True}, {
        "variables": "1058dff9e6e99224", "abs_weight_sum": 836.7349039612996, "total_loss": 45.30131912231445,
        "mlm_loss": 4.061845302581787, "disc_loss": 0.8242456316947937}),
    "uniform_options": ({"uniform_generator": True, "disallow_correct": True, "dedup_masking": True,
                         "temperature": 0.5, "gen_weight": 2.0, "disc_weight": 10.0, "mask_prob": 0.25, "seed": 3}, {
        "variables": "86abb2d6f30a3754", "abs_weight_sum": 514.4762726407253, "total_loss": 14.918968200683594,
        "mlm_loss": 4.094344139099121, "disc_loss": 0.6730279326438904}),
    "generator_options": ({"disallow_correct": True, "dedup_masking": True, "temperature": 0.5, "gen_weight": 2.0,
                           "disc_weight": 10.0, "mask_prob": 0.25, "max_predictions_per_seq": 3, "seed": 11}, {
        "variables": "b173aaa5259652b4", "abs_weight_sum": 685.8273351294088, "total_loss": 15.0658597946167,
        "mlm_loss": 4.093719005584717, "disc_loss": 0.6878421902656555}),
}


def fingerprint(model, batch):
    names = "\n".join(f"{v.path} {tuple(v.shape)} {v.trainable}" for v in model.weights)
    outputs = model.compute_losses(batch, training=True)
    found = {"variables": hashlib.sha256(names.encode()).hexdigest()[:16],
             "abs_weight_sum": float(sum(np.abs(np.asarray(v, "float64")).sum() for v in model.weights)),
             "total_loss": float(outputs.total_loss), "mlm_loss": float(outputs.mlm.loss)}
    if outputs.disc is not None:
        found["disc_loss"] = float(outputs.disc.loss)
    return found


@pytest.mark.parametrize("case", sorted(RECORDED))
def test_weights_and_losses_equal_those_of_the_keyword_constructor(case):
    hparams, recorded = RECORDED[case]
    config = tiny_config(**hparams)
    keras.utils.set_random_seed(config.seed)
    found = fingerprint(build_pretrainer(config), tiny_batch(lengths=[16, 12, 9, 6]))
    assert found.pop("variables") == recorded["variables"]
    assert found == pytest.approx({key: value for key, value in recorded.items() if key != "variables"}, rel=1e-6)


def test_the_config_names_every_setting_and_the_pretrainer_keeps_it_whole():
    config = tiny_config(gen_weight=2.0, dedup_masking=True, seed=5)
    settings = config.objective_settings()
    assert {name: getattr(config, name) for name in ObjectiveSettings.field_names()} == settings.to_dict()
    model = build_pretrainer(config)
    assert model.objective == settings and model.special_token_ids == (1, 2, 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.gen_weight = 3.0


def test_get_config_round_trips_through_from_config():
    config = tiny_config(electric_objective=True, temperature=0.5)
    keras.utils.set_random_seed(config.seed)
    model = build_pretrainer(config)
    saved = model.get_config()
    assert saved["objective"] == config.objective_settings().to_dict()
    keras.utils.set_random_seed(config.seed)
    generator, discriminator = build_encoders(config)
    clone = ElectraPretrainer.from_config({**saved, "generator": generator, "discriminator": discriminator})
    assert clone.objective == model.objective and clone.get_config() == saved
    batch = tiny_batch(lengths=[16, 12, 9, 6])
    assert fingerprint(clone, batch) == fingerprint(model, batch)


def test_the_electric_spellings_resolve_alike():
    readme = ObjectiveSettings(electra_objective=False, electric_objective=True)
    assert readme == ObjectiveSettings(electric_objective=True) and readme.electra_objective
    config = tiny_config(electra_objective=False, electric_objective=True)
    assert config.objective_settings() == tiny_config(electric_objective=True).objective_settings()


@pytest.mark.parametrize("values,fragment", [
    ({"mask_prob": 1.0}, "mask_prob"),
    ({"max_predictions_per_seq": 0}, "max_predictions_per_seq"),
    ({"electra_objective": False, "uniform_generator": True}, "uniform_generator"),
])
def test_bad_settings_are_refused_once_here_and_as_input_errors_by_the_config(values, fragment):
    with pytest.raises(ValueError, match=fragment):
        ObjectiveSettings(**values)
    with pytest.raises(InputError, match=f"pretraining config: .*{fragment}"):
        PretrainingConfig.create({"model_size": "electra_tiny", **values})
    with pytest.raises(ValueError, match="unknown objective settings"):
        ObjectiveSettings.from_dict({"mask_probability": 0.2})
