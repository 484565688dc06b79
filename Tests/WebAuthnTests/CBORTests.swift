import Foundation
import Testing
import WebAuthn

@Suite("CBOR (RFC 8949)")
struct CBORTests {
    /// RFC 8949 Appendix A examples within the accepted subset.
    static let appendixA: [(String, CBOR)] = [
        ("00", .unsigned(0)),
        ("17", .unsigned(23)),
        ("1818", .unsigned(24)),
        ("1903e8", .unsigned(1000)),
        ("1a000f4240", .unsigned(1_000_000)),
        ("1b000000e8d4a51000", .unsigned(1_000_000_000_000)),
        ("1bffffffffffffffff", .unsigned(UInt64.max)),
        ("20", CBOR(-1)),
        ("3863", CBOR(-100)),
        ("3bffffffffffffffff", .negative(UInt64.max)),
        ("40", .bytes(Data())),
        ("4401020304", .bytes(Data([1, 2, 3, 4]))),
        ("60", .text("")),
        ("6449455446", .text("IETF")),
        ("62c3bc", .text("ü")),
        ("64f0908591", .text("𐅑")),
        ("80", .array([])),
        ("83010203", .array([CBOR(1), CBOR(2), CBOR(3)])),
        ("8301820203820405", .array([CBOR(1), .array([CBOR(2), CBOR(3)]), .array([CBOR(4), CBOR(5)])])),
        ("a0", .map([:])),
        ("a201020304", .map([CBOR(1): CBOR(2), CBOR(3): CBOR(4)])),
        ("a26161016162820203", .map([.text("a"): CBOR(1), .text("b"): .array([CBOR(2), CBOR(3)])])),
        ("f4", .boolean(false)),
        ("f5", .boolean(true)),
        ("f6", .null),
    ]

    @Test("RFC 8949 Appendix A examples decode and re-encode byte for byte")
    func appendixAExamples() throws {
        for (encoding, value) in Self.appendixA {
            #expect(try CBORDecoder().decode(hex(encoding)) == value, "\(encoding)")
            #expect(value.encoded() == hex(encoding), "\(encoding)")
        }
    }

    @Test("the encoder sorts map keys in CTAP2 canonical order (major type, length, bytes)")
    func canonicalOrder() throws {
        let map = CBOR.map([
            .text("aa"): CBOR(5), .text("b"): CBOR(4), CBOR(-3): CBOR(3), CBOR(-1): CBOR(2), CBOR(3): CBOR(1),
            CBOR(1000): CBOR(0), CBOR(1): CBOR(6),
        ])
        // 1, 3, 1000 (major 0, shorter first), -1, -3 (major 1), "b", "aa" (major 3, shorter first).
        #expect(map.encoded() == hex("a7" + "0106" + "0301" + "1903e800" + "2002" + "2203" + "616204" + "62616105"))
        #expect(try CBORDecoder().decode(map.encoded()) == map)
    }

    @Test("random nested values round-trip through encode and decode")
    func roundTrip() throws {
        func random(depth: Int) -> CBOR {
            switch Int.random(in: 0..<(depth > 3 ? 6 : 8)) {
            case 0: return .unsigned(UInt64.random(in: 0...UInt64.max) >> UInt64.random(in: 0...63))
            case 1: return .negative(UInt64.random(in: 0...UInt64.max) >> UInt64.random(in: 0...63))
            case 2: return .bytes(Data((0..<Int.random(in: 0...300)).map { _ in UInt8.random(in: 0...255) }))
            case 3: return .text(String(repeating: "é", count: Int.random(in: 0...40)))
            case 4: return [CBOR.boolean(true), .boolean(false), .null].randomElement()!
            case 5: return CBOR(Int.random(in: -1000...1000))
            case 6: return .array((0..<Int.random(in: 0...5)).map { _ in random(depth: depth + 1) })
            default:
                var map: [CBOR: CBOR] = [:]
                for _ in 0..<Int.random(in: 0...5) { map[random(depth: depth + 1)] = random(depth: depth + 1) }
                return .map(map)
            }
        }
        for _ in 0..<300 {
            let value = random(depth: 0)
            #expect(try CBORDecoder().decode(value.encoded()) == value)
        }
    }

    @Test("refusals: indefinite lengths, non-shortest forms, tags, floats, other simple values, reserved values")
    func refusals() {
        let refused = [
            "5f42010243030405ff",  // indefinite byte string
            "7f657374726561646d696e67ff",  // indefinite text string
            "9fff",  // indefinite array
            "bfff",  // indefinite map
            "ff",  // break outside an indefinite item
            "1817",  // 23 in one extra byte
            "190017",  // 23 in two bytes
            "1900ff",  // 255 in two bytes
            "1a0000ffff",  // 65535 in four bytes
            "1b00000000ffffffff",  // 2^32 − 1 in eight bytes
            "3817",  // −24 not shortest
            "5801ff",  // a one-byte string with a one-byte length
            "c11a514b67b0",  // tag 1
            "f93c00",  // half float
            "fa47c35000",  // single float
            "fb3ff199999999999a",  // double float
            "f7",  // undefined
            "f0",  // simple value 16
            "f818",  // simple value 24
            "1c", "1d", "1e",  // reserved additional information
        ]
        for encoding in refused {
            expectError(.invalidCBOR) { try CBORDecoder().decode(hex(encoding)) }
        }
    }

    @Test("refusals: truncation, trailing bytes, bad UTF-8, duplicate keys, lying lengths")
    func structuralRefusals() {
        let refused = [
            "",  // nothing
            "18",  // head without its argument
            "1903",  // truncated argument
            "440102",  // byte string shorter than its length
            "830102",  // array missing an element
            "a1010203",  // map with a trailing byte
            "a201",  // map missing a value
            "0000",  // trailing byte
            "62c328",  // invalid UTF-8
            "63eda080",  // a surrogate encoded in UTF-8
            "a201020103",  // duplicate key 1
            "a2616101616102",  // duplicate key "a"
            "9b00000000ffffffff",  // array claiming 2^32 − 1 items
            "5b00000000ffffffff00",  // byte string claiming 2^32 − 1 bytes
        ]
        for encoding in refused {
            let error = #expect(throws: WebAuthnError.self, "\(encoding)") { try CBORDecoder().decode(hex(encoding)) }
            #expect(error?.code == .invalidCBOR)
        }
    }

    @Test("depth and size limits")
    func limits() throws {
        let deep = Data(repeating: 0x81, count: 17) + Data([0x00])
        expectError(.invalidCBOR) { try CBORDecoder().decode(deep) }
        #expect(try CBORDecoder(maximumDepth: 17).decode(deep) != .null)
        let nested16 = Data(repeating: 0x81, count: 16) + Data([0x00])
        #expect(try CBORDecoder().decode(nested16) != .null)
        let big = CBOR.bytes(Data(count: 70_000)).encoded()
        expectError(.invalidCBOR) { try CBORDecoder().decode(big) }
        #expect(try CBORDecoder(maximumSize: 80_000).decode(big) == .bytes(Data(count: 70_000)))
    }

    /// fido2.cbor has no null, so the values given to it have none.
    @Test("python-fido2's CBOR codec reads what we write and writes what we read")
    func agreesWithFido2() throws {
        let oracle = try webAuthnOracle()
        for (_, value) in Self.appendixA.filter({ $0.1 != .null }) + [
            (
                "",
                CBOR.map([
                    .text("fmt"): .text("none"), .text("attStmt"): .map([:]),
                    .text("authData"): .bytes(Data(count: 37)),
                    CBOR(-7): .array([.boolean(true), .boolean(false), .text("x")]), CBOR(300): CBOR(-300),
                ])
            )
        ] {
            let theirs = try oracle.bytes("fido2_cbor_decode", ["data": value.encoded()])
            #expect(theirs == value.encoded(), "\(value)")
        }
    }
}
