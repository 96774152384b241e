from agentctx.type.v1 import content_pb2 as _content_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FunctionCallingMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FUNCTION_CALLING_MODE_UNSPECIFIED: _ClassVar[FunctionCallingMode]
    FUNCTION_CALLING_MODE_AUTO: _ClassVar[FunctionCallingMode]
    FUNCTION_CALLING_MODE_ANY: _ClassVar[FunctionCallingMode]
    FUNCTION_CALLING_MODE_NONE: _ClassVar[FunctionCallingMode]

class FinishReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FINISH_REASON_UNSPECIFIED: _ClassVar[FinishReason]
    FINISH_REASON_STOP: _ClassVar[FinishReason]
    FINISH_REASON_MAX_TOKENS: _ClassVar[FinishReason]
    FINISH_REASON_SAFETY: _ClassVar[FinishReason]
    FINISH_REASON_RECITATION: _ClassVar[FinishReason]
    FINISH_REASON_MALFORMED_FUNCTION_CALL: _ClassVar[FinishReason]
    FINISH_REASON_OTHER: _ClassVar[FinishReason]
FUNCTION_CALLING_MODE_UNSPECIFIED: FunctionCallingMode
FUNCTION_CALLING_MODE_AUTO: FunctionCallingMode
FUNCTION_CALLING_MODE_ANY: FunctionCallingMode
FUNCTION_CALLING_MODE_NONE: FunctionCallingMode
FINISH_REASON_UNSPECIFIED: FinishReason
FINISH_REASON_STOP: FinishReason
FINISH_REASON_MAX_TOKENS: FinishReason
FINISH_REASON_SAFETY: FinishReason
FINISH_REASON_RECITATION: FinishReason
FINISH_REASON_MALFORMED_FUNCTION_CALL: FinishReason
FINISH_REASON_OTHER: FinishReason

class Tool(_message.Message):
    __slots__ = ("function_declarations",)
    FUNCTION_DECLARATIONS_FIELD_NUMBER: _ClassVar[int]
    function_declarations: _containers.RepeatedCompositeFieldContainer[FunctionDeclaration]
    def __init__(self, function_declarations: _Optional[_Iterable[_Union[FunctionDeclaration, _Mapping]]] = ...) -> None: ...

class FunctionDeclaration(_message.Message):
    __slots__ = ("name", "description", "parameters", "response")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    parameters: _struct_pb2.Struct
    response: _struct_pb2.Struct
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., parameters: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., response: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ToolConfig(_message.Message):
    __slots__ = ("mode", "allowed_function_names")
    MODE_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_FUNCTION_NAMES_FIELD_NUMBER: _ClassVar[int]
    mode: FunctionCallingMode
    allowed_function_names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, mode: _Optional[_Union[FunctionCallingMode, str]] = ..., allowed_function_names: _Optional[_Iterable[str]] = ...) -> None: ...

class GenerationConfig(_message.Message):
    __slots__ = ("temperature", "top_p", "top_k", "max_output_tokens", "stop_sequences", "seed", "response_mime_type")
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    STOP_SEQUENCES_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    temperature: float
    top_p: float
    top_k: int
    max_output_tokens: int
    stop_sequences: _containers.RepeatedScalarFieldContainer[str]
    seed: int
    response_mime_type: str
    def __init__(self, temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., top_k: _Optional[int] = ..., max_output_tokens: _Optional[int] = ..., stop_sequences: _Optional[_Iterable[str]] = ..., seed: _Optional[int] = ..., response_mime_type: _Optional[str] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ("prompt_tokens", "cached_prompt_tokens", "output_tokens", "thoughts_tokens", "total_tokens", "cache_write_tokens")
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHED_PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    THOUGHTS_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHE_WRITE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    prompt_tokens: int
    cached_prompt_tokens: int
    output_tokens: int
    thoughts_tokens: int
    total_tokens: int
    cache_write_tokens: int
    def __init__(self, prompt_tokens: _Optional[int] = ..., cached_prompt_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., thoughts_tokens: _Optional[int] = ..., total_tokens: _Optional[int] = ..., cache_write_tokens: _Optional[int] = ...) -> None: ...

class ModelRequest(_message.Message):
    __slots__ = ("model", "system_instruction", "contents", "tools", "tool_config", "generation_config")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_INSTRUCTION_FIELD_NUMBER: _ClassVar[int]
    CONTENTS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CONFIG_FIELD_NUMBER: _ClassVar[int]
    GENERATION_CONFIG_FIELD_NUMBER: _ClassVar[int]
    model: str
    system_instruction: _content_pb2.Content
    contents: _containers.RepeatedCompositeFieldContainer[_content_pb2.Content]
    tools: _containers.RepeatedCompositeFieldContainer[Tool]
    tool_config: ToolConfig
    generation_config: GenerationConfig
    def __init__(self, model: _Optional[str] = ..., system_instruction: _Optional[_Union[_content_pb2.Content, _Mapping]] = ..., contents: _Optional[_Iterable[_Union[_content_pb2.Content, _Mapping]]] = ..., tools: _Optional[_Iterable[_Union[Tool, _Mapping]]] = ..., tool_config: _Optional[_Union[ToolConfig, _Mapping]] = ..., generation_config: _Optional[_Union[GenerationConfig, _Mapping]] = ...) -> None: ...

class ModelResponse(_message.Message):
    __slots__ = ("content", "finish_reason", "usage", "model_version")
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    content: _content_pb2.Content
    finish_reason: FinishReason
    usage: Usage
    model_version: str
    def __init__(self, content: _Optional[_Union[_content_pb2.Content, _Mapping]] = ..., finish_reason: _Optional[_Union[FinishReason, str]] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., model_version: _Optional[str] = ...) -> None: ...
