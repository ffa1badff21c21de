from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Array(_message.Message):
    __slots__ = ("dtype", "shape", "data")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    dtype: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    data: bytes
    def __init__(self, dtype: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ..., data: _Optional[bytes] = ...) -> None: ...

class NamedArray(_message.Message):
    __slots__ = ("name", "array")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARRAY_FIELD_NUMBER: _ClassVar[int]
    name: str
    array: Array
    def __init__(self, name: _Optional[str] = ..., array: _Optional[_Union[Array, _Mapping]] = ...) -> None: ...

class ArraySpec(_message.Message):
    __slots__ = ("shape", "dtype", "num_values", "minimum", "maximum")
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    NUM_VALUES_FIELD_NUMBER: _ClassVar[int]
    MINIMUM_FIELD_NUMBER: _ClassVar[int]
    MAXIMUM_FIELD_NUMBER: _ClassVar[int]
    shape: _containers.RepeatedScalarFieldContainer[int]
    dtype: str
    num_values: int
    minimum: _containers.RepeatedScalarFieldContainer[float]
    maximum: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, shape: _Optional[_Iterable[int]] = ..., dtype: _Optional[str] = ..., num_values: _Optional[int] = ..., minimum: _Optional[_Iterable[float]] = ..., maximum: _Optional[_Iterable[float]] = ...) -> None: ...

class NamedArraySpec(_message.Message):
    __slots__ = ("name", "spec")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    name: str
    spec: ArraySpec
    def __init__(self, name: _Optional[str] = ..., spec: _Optional[_Union[ArraySpec, _Mapping]] = ...) -> None: ...

class HandshakeRequest(_message.Message):
    __slots__ = ("protocol_version", "task", "auth_token")
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    AUTH_TOKEN_FIELD_NUMBER: _ClassVar[int]
    protocol_version: int
    task: int
    auth_token: str
    def __init__(self, protocol_version: _Optional[int] = ..., task: _Optional[int] = ..., auth_token: _Optional[str] = ...) -> None: ...

class HandshakeResponse(_message.Message):
    __slots__ = ("protocol_version", "session_id", "num_envs", "env_id_begin", "env_id_end", "config_json", "observation_spec", "action_spec", "local_stream_address")
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    NUM_ENVS_FIELD_NUMBER: _ClassVar[int]
    ENV_ID_BEGIN_FIELD_NUMBER: _ClassVar[int]
    ENV_ID_END_FIELD_NUMBER: _ClassVar[int]
    CONFIG_JSON_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_SPEC_FIELD_NUMBER: _ClassVar[int]
    ACTION_SPEC_FIELD_NUMBER: _ClassVar[int]
    LOCAL_STREAM_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    protocol_version: int
    session_id: str
    num_envs: int
    env_id_begin: int
    env_id_end: int
    config_json: str
    observation_spec: _containers.RepeatedCompositeFieldContainer[NamedArraySpec]
    action_spec: ArraySpec
    local_stream_address: str
    def __init__(self, protocol_version: _Optional[int] = ..., session_id: _Optional[str] = ..., num_envs: _Optional[int] = ..., env_id_begin: _Optional[int] = ..., env_id_end: _Optional[int] = ..., config_json: _Optional[str] = ..., observation_spec: _Optional[_Iterable[_Union[NamedArraySpec, _Mapping]]] = ..., action_spec: _Optional[_Union[ArraySpec, _Mapping]] = ..., local_stream_address: _Optional[str] = ...) -> None: ...

class StepBatch(_message.Message):
    __slots__ = ("env_ids", "run_ids", "reward", "done", "abandoned", "episode_step", "raw_reward", "observation", "life_lost")
    ENV_IDS_FIELD_NUMBER: _ClassVar[int]
    RUN_IDS_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    ABANDONED_FIELD_NUMBER: _ClassVar[int]
    EPISODE_STEP_FIELD_NUMBER: _ClassVar[int]
    RAW_REWARD_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    LIFE_LOST_FIELD_NUMBER: _ClassVar[int]
    env_ids: Array
    run_ids: Array
    reward: Array
    done: Array
    abandoned: Array
    episode_step: Array
    raw_reward: Array
    observation: _containers.RepeatedCompositeFieldContainer[NamedArray]
    life_lost: Array
    def __init__(self, env_ids: _Optional[_Union[Array, _Mapping]] = ..., run_ids: _Optional[_Union[Array, _Mapping]] = ..., reward: _Optional[_Union[Array, _Mapping]] = ..., done: _Optional[_Union[Array, _Mapping]] = ..., abandoned: _Optional[_Union[Array, _Mapping]] = ..., episode_step: _Optional[_Union[Array, _Mapping]] = ..., raw_reward: _Optional[_Union[Array, _Mapping]] = ..., observation: _Optional[_Iterable[_Union[NamedArray, _Mapping]]] = ..., life_lost: _Optional[_Union[Array, _Mapping]] = ...) -> None: ...

class ActionBatch(_message.Message):
    __slots__ = ("actions", "refused_env_ids", "refusal")
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    REFUSED_ENV_IDS_FIELD_NUMBER: _ClassVar[int]
    REFUSAL_FIELD_NUMBER: _ClassVar[int]
    actions: Array
    refused_env_ids: _containers.RepeatedScalarFieldContainer[int]
    refusal: str
    def __init__(self, actions: _Optional[_Union[Array, _Mapping]] = ..., refused_env_ids: _Optional[_Iterable[int]] = ..., refusal: _Optional[str] = ...) -> None: ...

class LocalStreamOpen(_message.Message):
    __slots__ = ("session_id", "auth_token")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    AUTH_TOKEN_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    auth_token: str
    def __init__(self, session_id: _Optional[str] = ..., auth_token: _Optional[str] = ...) -> None: ...

class StreamStatus(_message.Message):
    __slots__ = ("code", "details", "reason")
    CODE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    code: int
    details: str
    reason: str
    def __init__(self, code: _Optional[int] = ..., details: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class LocalStreamReply(_message.Message):
    __slots__ = ("actions", "error")
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    actions: ActionBatch
    error: StreamStatus
    def __init__(self, actions: _Optional[_Union[ActionBatch, _Mapping]] = ..., error: _Optional[_Union[StreamStatus, _Mapping]] = ...) -> None: ...
