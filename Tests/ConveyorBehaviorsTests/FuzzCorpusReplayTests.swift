import ConveyorFuzzChecks
import ConveyorPipeline
import Foundation
import Testing

/// Replays every input under `FuzzTesting/Corpus/<target>/` through its target's check on
/// every test run: what a fuzzer once found (or kept for its coverage) stays found. The fuzzers
/// themselves run in CI (`FuzzTesting/run.sh`); this needs no fuzzer.
@Suite struct FuzzCorpusReplayTests {
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("FuzzTesting/Corpus")

    static let targets = FuzzChecks.all.map(\.name)

    @Test(arguments: targets)
    func everyCommittedInputPassesItsCheck(_ target: String) throws {
        let folder = Self.corpus.appendingPathComponent(target)
        let files = try FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)
            .filter { !$0.lastPathComponent.hasPrefix(".") }
        #expect(!files.isEmpty, "no corpus for \(target)")
        let check = try #require(FuzzChecks.check(named: target))
        for file in files {
            let bytes = [UInt8](try Data(contentsOf: file))
            #expect(check(bytes) == nil, "\(target)/\(file.lastPathComponent)")
        }
    }

    @Test func everyTargetHasACorpusFolderAndEveryFolderATarget() throws {
        let folders = try FileManager.default.contentsOfDirectory(atPath: Self.corpus.path).filter { !$0.hasPrefix(".") }
        #expect(Set(folders) == Set(Self.targets))
    }

    /// The checks' oracles can fail: each is fed an input that breaks it through a broken parser
    /// stand-in would be circular, so instead the redactor's marker oracle is shown to see a
    /// `§` in each spelling the generator produces.
    @Test func theRedactorsMarkerOracleSeesEverySpelling() {
        for spelled in ["a§b", "a%C2%A7b", "a%c2%a7b", "a\\u00a7b", "a\\u00A7b"] {
            #expect(FuzzChecks.leaksMarker(spelled), "\(spelled)")
        }
        #expect(!FuzzChecks.leaksMarker("a%C2b ***"))
    }

    /// The `framing` seeds are the heads their names say, so the replay runs the oracle on both
    /// outcomes: each refused seed is refused for the rule its name gives, the others pass.
    @Test func theFramingSeedsAreTheHeadsTheirNamesSay() throws {
        let accepted: MalformedResponse.Rule? = nil
        let expected: [String: MalformedResponse.Rule?] = [
            "two-agreeing-content-lengths": .contentLength, "content-length-list": .contentLength,
            "sign-and-space-in-a-length": .contentLength, "bare-cr-in-a-value": .controlCharacter,
            "nul-in-a-name": .controlCharacter, "invalid-utf8-in-a-name": .notUTF8,
            "replacement-character-sent-as-is": .notUTF8, "obs-text-is-kept": accepted, "a-clean-head": accepted,
        ]
        let folder = Self.corpus.appendingPathComponent("framing")
        for (seed, rule) in expected {
            let fields = FuzzChecks.framingFields([UInt8](try Data(contentsOf: folder.appendingPathComponent(seed))))
            do throws(NetworkError) {
                try FramingPolicy.check(HTTPHeaders(fields.map { HTTPHeaders.Field(name: $0.name, value: $0.value) }))
                #expect(rule == nil, "\(seed) was accepted")
            } catch {
                #expect((error.underlying as? MalformedResponse)?.rule == rule, "\(seed): \(error)")
            }
        }
    }
}
