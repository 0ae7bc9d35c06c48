"""A failure as Flink's clients read it: Flink's REST answers carry an exception as
`{"serialized-throwable": <base64 of a Java-serialized org.apache.flink.util.
SerializedThrowable>}` (SavepointInfo's failure-cause); its deserializer reads nothing
else. Pure: the bytes are a template (a SerializedThrowable of Flink 2.3 with its message,
class name and stack trace replaced by placeholders, its cause and stack frames empty) in
which the three strings are written with Java's own string encoding.

The template was made once with Java 17 against flink-dist (java --add-opens
java.base/java.lang=ALL-UNNAMED): `new SerializedThrowable(new Exception("@M@"))` with an
empty stack, its serializedException set to new byte[0], originalErrorClassName to "@C@" and
fullStringifiedStackTrace to "@S@" by reflection, written with an ObjectOutputStream.
SerializedThrowable's serialVersionUID is fixed, so Flink 1.x and 2.x clients read it.
"""
from __future__ import annotations

import base64
import struct

TEMPLATE = base64.b64decode(
    "rO0ABXNyAClvcmcuYXBhY2hlLmZsaW5rLnV0aWwuU2VyaWFsaXplZFRocm93YWJsZWUWnfUfpxPzAgADTAAZ"
    "ZnVsbFN0cmluZ2lmaWVkU3RhY2tUcmFjZXQAEkxqYXZhL2xhbmcvU3RyaW5nO0wAFm9yaWdpbmFsRXJyb3JD"
    "bGFzc05hbWVxAH4AAVsAE3NlcmlhbGl6ZWRFeGNlcHRpb250AAJbQnhyABNqYXZhLmxhbmcuRXhjZXB0aW9u"
    "0P0fPho7HMQCAAB4cgATamF2YS5sYW5nLlRocm93YWJsZdXGNSc5d7jLAwAETAAFY2F1c2V0ABVMamF2YS9s"
    "YW5nL1Rocm93YWJsZTtMAA1kZXRhaWxNZXNzYWdlcQB+AAFbAApzdGFja1RyYWNldAAeW0xqYXZhL2xhbmcv"
    "U3RhY2tUcmFjZUVsZW1lbnQ7TAAUc3VwcHJlc3NlZEV4Y2VwdGlvbnN0ABBMamF2YS91dGlsL0xpc3Q7eHBw"
    "dAAYamF2YS5sYW5nLkV4Y2VwdGlvbjogQE1AdXIAHltMamF2YS5sYW5nLlN0YWNrVHJhY2VFbGVtZW50OwJG"
    "Kjw8/SI5AgAAeHAAAAAAc3IAH2phdmEudXRpbC5Db2xsZWN0aW9ucyRFbXB0eUxpc3R6uBe0PKee3gIAAHhw"
    "eHQAA0BTQHQAA0BDQHVyAAJbQqzzF/gGCFTgAgAAeHAAAAAA")
TC_STRING, TC_LONGSTRING = 0x74, 0x7C
PLACEHOLDERS = {"message": "java.lang.Exception: @M@", "class": "@C@", "stack": "@S@"}


def modified_utf8(text: str) -> bytes:
    """Java's modified UTF-8 (DataOutput.writeUTF): UTF-16 code units, U+0000 as two
    bytes, each surrogate as three."""
    out = bytearray()
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        u = (units[i] << 8) | units[i + 1]
        if 0 < u < 0x80:
            out.append(u)
        elif u < 0x800:
            out += bytes((0xC0 | u >> 6, 0x80 | u & 0x3F))
        else:
            out += bytes((0xE0 | u >> 12, 0x80 | u >> 6 & 0x3F, 0x80 | u & 0x3F))
    return bytes(out)


def java_string(text: str) -> bytes:
    """A TC_STRING (or TC_LONGSTRING past 65535 bytes) record."""
    data = modified_utf8(text)
    if len(data) <= 0xFFFF:
        return struct.pack(">BH", TC_STRING, len(data)) + data
    return struct.pack(">BQ", TC_LONGSTRING, len(data)) + data


def serialized_throwable(cls: str, message: str, stack: str) -> bytes:
    """The Java serialization of a SerializedThrowable: toString() is "<cls>: <message>",
    printStackTrace() prints `stack`."""
    values = {"message": message, "class": cls, "stack": stack}
    spans = sorted((TEMPLATE.index(java_string(p)), len(java_string(p)), key)
                   for key, p in PLACEHOLDERS.items())
    out, at = bytearray(), 0
    for start, length, key in spans:  # by position: a value may hold a placeholder
        out += TEMPLATE[at:start] + java_string(values[key])
        at = start + length
    return bytes(out + TEMPLATE[at:])


def failure_cause(cls: str, message: str) -> str:
    """Base64 for the "serialized-throwable" field of a Flink failure-cause."""
    return base64.b64encode(serialized_throwable(cls, message, f"{cls}: {message}")).decode()
