#!/usr/bin/env bash
# Regenerates the real test-runner logs of swerve-log-parsers' differential test
# (tests/differential.rs): writes small projects with passing, failing and skipped tests (names
# with spaces and brackets where the runner allows) into a temporary directory, runs each
# runner the way SWE-bench's eval scripts do, and stores its output as <runner>.log here.
# Runners that are not installed are skipped with a line on stderr. The logs are committed, so
# the test itself needs none of these runners.
#
# Debian packages: golang-go php-cli phpunit ruby ruby-rspec ruby-minitest ruby-test-unit
# cucumber libgtest-dev doctest-dev mocha jest jq, plus cargo and node (>= 20). Debian's jest
# needs Debian's own nodejs (18): where node comes from elsewhere, run this script in a Debian
# container with `jest jq` installed; the runners it lacks are skipped and their logs kept.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

have() {
    command -v "$1" >/dev/null 2>&1 || { echo "skipped: $1 not installed" >&2; return 1; }
}

# `record NAME DIR COMMAND...` runs COMMAND in $work/DIR and keeps its output, stdout and
# stderr together, in $here/NAME.log.
record() {
    local name=$1 dir=$2
    shift 2
    (cd "$work/$dir" && "$@") >"$here/$name.log" 2>&1
    echo "wrote $name.log (exit $?)" >&2
}

# --- cargo test (parse_log_cargo) ---
if have cargo; then
    mkdir -p "$work/cargo/src"
    cat >"$work/cargo/Cargo.toml" <<'EOF'
[package]
name = "demo"
version = "0.1.0"
edition = "2021"
EOF
    cat >"$work/cargo/src/lib.rs" <<'EOF'
/// Adds.
///
/// ```
/// assert_eq!(demo::add(1, 2), 3);
/// ```
pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

#[cfg(test)]
mod tests {
    #[test]
    fn adds() {
        assert_eq!(super::add(2, 2), 4);
    }

    #[test]
    fn broken() {
        assert_eq!(super::add(2, 2), 5, "arithmetic");
    }

    #[test]
    #[ignore = "slow"]
    fn later() {}

    #[test]
    fn prints_then_passes() {
        println!("test output that looks like a result ... ok");
    }

    mod nested {
        #[test]
        fn deep_pass() {}
    }
}
EOF
    record cargo cargo env CARGO_TARGET_DIR="$work/cargo-target" cargo test --offline --no-fail-fast -- --test-threads=1
fi

# --- go test -v (parse_log_gotest) ---
if have go; then
    mkdir -p "$work/gotest"
    cat >"$work/gotest/go.mod" <<'EOF'
module example.com/demo

go 1.19
EOF
    cat >"$work/gotest/demo_test.go" <<'EOF'
package demo

import "testing"

func TestAdd(t *testing.T) {
	if 2+2 != 4 {
		t.Fatal("math")
	}
}

func TestBroken(t *testing.T) {
	t.Errorf("want %d, got %d", 5, 4)
}

func TestLater(t *testing.T) {
	t.Skip("not yet")
}

func TestTable(t *testing.T) {
	for _, name := range []string{"one case", "two [brackets]", "fails (x)"} {
		name := name
		t.Run(name, func(t *testing.T) {
			if name == "fails (x)" {
				t.Fatal("boom")
			}
		})
	}
}
EOF
    record gotest gotest env GOCACHE="$work/go-cache" GOPATH="$work/go-path" GOFLAGS=-mod=mod GOPROXY=off go test -v ./...
fi

# --- PHPUnit --testdox (parse_log_phpunit) ---
if have phpunit; then
    mkdir -p "$work/phpunit/tests"
    cat >"$work/phpunit/tests/CalculatorTest.php" <<'EOF'
<?php
use PHPUnit\Framework\TestCase;

final class CalculatorTest extends TestCase
{
    public function testAddsNumbers(): void
    {
        $this->assertSame(4, 2 + 2);
    }

    public function testDividesByZero(): void
    {
        $this->assertSame(1, 2);
    }

    public function testLater(): void
    {
        $this->markTestSkipped('not yet');
    }

    /** @testdox Handles [brackets] and (parentheses) */
    public function testNamed(): void
    {
        $this->assertTrue(true);
    }

    /** @dataProvider cases */
    public function testProvided(int $a): void
    {
        $this->assertSame(0, $a % 2);
    }

    public static function cases(): array
    {
        return ['even number' => [2], 'odd [one]' => [3]];
    }
}
EOF
    cat >"$work/phpunit/tests/StringsTest.php" <<'EOF'
<?php
use PHPUnit\Framework\TestCase;

final class StringsTest extends TestCase
{
    public function testUpper(): void
    {
        $this->assertSame('A', strtoupper('a'));
    }

    public function testIncomplete(): void
    {
        $this->markTestIncomplete('todo');
    }
}
EOF
    record phpunit phpunit phpunit --testdox --colors=never tests
fi

# --- Ruby minitest, test-unit, RSpec, Cucumber ---
if have ruby; then
    mkdir -p "$work/minitest"
    cat >"$work/minitest/demo_test.rb" <<'EOF'
require "minitest/autorun"

class TestDemo < Minitest::Test
  def test_adds
    assert_equal 4, 2 + 2
  end

  def test_broken
    assert_equal 5, 2 + 2
  end

  def test_raises
    raise "boom"
  end

  def test_later
    skip "not yet"
  end

  define_method("test_with spaces [and brackets]") { assert true }
end
EOF
    record minitest minitest ruby demo_test.rb -v --seed 1

    mkdir -p "$work/ruby_unit"
    cat >"$work/ruby_unit/demo_test.rb" <<'EOF'
require "test/unit"

class TestDemo < Test::Unit::TestCase
  def test_adds
    assert_equal 4, 2 + 2
  end

  def test_broken
    assert_equal 5, 2 + 2
  end

  def test_raises
    raise "boom"
  end

  def test_later
    omit "not yet"
  end

  test "with spaces [and brackets]" do
    assert true
  end
end
EOF
    record ruby_unit ruby_unit ruby demo_test.rb -v --no-use-color
fi

if have rspec; then
    mkdir -p "$work/rspec/spec"
    cat >"$work/rspec/spec/demo_spec.rb" <<'EOF'
RSpec.describe "Calculator" do
  it "adds numbers" do
    expect(2 + 2).to eq(4)
  end

  it "divides [by zero]" do
    expect(1).to eq(2)
  end

  it "is pending" do
    pending "not yet"
    raise "still broken"
  end

  context "with a - dash" do
    it "passes - really" do
      expect(true).to be(true)
    end
  end

  xit "is skipped" do
  end
end
EOF
    record rspec rspec rspec --no-color --format documentation spec
    # What SWE-bench's eval scripts print: rspec's JSON report turned into "description - status"
    # lines.
    (cd "$work/rspec" && rspec --format json --out "$work/rspec.json" spec >/dev/null 2>&1
        ruby -rjson -e 'JSON.parse(File.read(ARGV[0]))["examples"].each { |e| puts "#{e["full_description"]} - #{e["status"]}" }' "$work/rspec.json") \
        >"$here/rspec_transformed_json.log" 2>&1
    echo "wrote rspec_transformed_json.log" >&2
fi

if have cucumber; then
    mkdir -p "$work/cucumber/features/step_definitions"
    cat >"$work/cucumber/features/demo.feature" <<'EOF'
Feature: Demo

  Scenario: passing scenario
    Given a step that passes

  Scenario: failing [scenario]
    Given a step that passes
    Then a step that fails

  Scenario: undefined scenario
    Given a step nobody wrote
EOF
    cat >"$work/cucumber/features/step_definitions/steps.rb" <<'EOF'
Given("a step that passes") {}
Then("a step that fails") { raise "boom" }
EOF
    record cucumber cucumber cucumber --no-color --format progress
fi

# --- GoogleTest (parse_log_googletest) ---
if have g++ && [ -e /usr/include/gtest/gtest.h ]; then
    mkdir -p "$work/googletest"
    cat >"$work/googletest/demo_test.cc" <<'EOF'
#include <gtest/gtest.h>

TEST(Math, Adds) { EXPECT_EQ(4, 2 + 2); }
TEST(Math, Breaks) { EXPECT_EQ(5, 2 + 2); }
TEST(Math, Later) { GTEST_SKIP() << "not yet"; }

class Param : public ::testing::TestWithParam<int> {};
TEST_P(Param, IsEven) { EXPECT_EQ(0, GetParam() % 2); }
INSTANTIATE_TEST_SUITE_P(Numbers, Param, ::testing::Values(2, 3));
EOF
    (cd "$work/googletest" && g++ -std=c++17 demo_test.cc -lgtest -lgtest_main -pthread -o demo_test)
    record googletest googletest ./demo_test --gtest_color=no
fi

# --- doctest -s -r=xml (parse_log_doctest) ---
if have g++ && [ -e /usr/include/doctest/doctest.h ]; then
    mkdir -p "$work/doctest"
    cat >"$work/doctest/demo_test.cc" <<'EOF'
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <vector>

TEST_CASE("vector <int> grows") {
    std::vector<int> v;
    SUBCASE("push_back") {
        v.push_back(1);
        CHECK(v.size() == 1);
    }
    SUBCASE("reserve [capacity]") {
        v.reserve(4);
        CHECK(v.capacity() >= 4);
        CHECK(v.size() == 1);
    }
}

TEST_CASE("no subcases") { CHECK(1 == 1); }
EOF
    (cd "$work/doctest" && g++ -std=c++17 demo_test.cc -o demo_test)
    record doctest doctest ./demo_test -s -r=xml
fi

# --- Node's test runner with TAP output (parse_log_tap) ---
if have node; then
    mkdir -p "$work/tap"
    cat >"$work/tap/demo.test.mjs" <<'EOF'
import { describe, it, test } from "node:test";
import assert from "node:assert";

test("adds numbers", () => assert.strictEqual(2 + 2, 4));
test("divides [by zero]", () => assert.strictEqual(1, 2));
test("later", { skip: "not yet" }, () => {});
test("todo one", { todo: true }, () => assert.fail("nope"));
describe("suite with spaces", () => {
  it("nested passes", () => {});
  it("nested fails", () => assert.ok(false));
});
EOF
    record tap tap node --test --test-reporter=tap demo.test.mjs
fi

# --- mocha: spec (highlightjs), min (eslint) and json (prismjs) reporters ---
if have mocha; then
    # Debian's mocha finds its dependencies there; a node not from Debian does not look.
    export NODE_PATH=/usr/share/nodejs:/usr/lib/nodejs
    mkdir -p "$work/mocha/tests" "$work/mocha/node_modules/.bin"
    ln -s "$(command -v mocha)" "$work/mocha/node_modules/.bin/mocha"
    cat >"$work/mocha/tests/run.js" <<'EOF'
const assert = require("assert");

describe("markup", function () {
  it("renders [brackets]", function () {
    assert.strictEqual(1, 1);
  });
  it("breaks", function () {
    assert.strictEqual(1, 2);
  });
  it.skip("later", function () {});
  describe("nested suite", function () {
    it("deep pass", function () {});
    it("throws TypeError", function () {
      null.x;
    });
  });
});
EOF
    # Debian's log-symbols does not load from mocha's CommonJS code (the spec reporter then
    # prints `undefined` for ✓); give the reporters mocha's own symbols back.
    cat >"$work/mocha/symbols.js" <<'EOF'
const Base = require("mocha/lib/reporters/base");
Base.symbols = { ok: "✓", err: "✖", dot: "․", comma: ",", bang: "!" };
EOF
    record highlightjs mocha mocha --no-color --require ./symbols.js --reporter spec tests/run.js
    record eslint mocha mocha --no-color --require ./symbols.js --reporter min tests/run.js
    # The eval script runs under `set -x`, so the command is in the log; prismjs's parser splits
    # on it.
    record prismjs mocha bash -xc './node_modules/.bin/mocha tests/run.js --reporter json'
fi

# --- Jest: --verbose (parse_log_jest) and --json through jq (parse_log_jest_json) ---
if have jest && have jq; then
    mkdir -p "$work/jest/src"
    # No Babel transform: plain CommonJS test files.
    echo 'module.exports = { testEnvironment: "node", transform: {} };' >"$work/jest/jest.config.js"
    cat >"$work/jest/src/calc.test.js" <<'EOF'
describe("calc [one]", () => {
  test("adds numbers", () => {
    expect(1 + 2).toBe(3);
  });
  test("fails [x] with spaces", () => {
    expect(1 + 1).toBe(3);
  });
  test.skip("skipped thing", () => {});
  test.todo("later");
  describe("nested", () => {
    test("adds numbers", () => {
      expect(2 + 2).toBe(4);
    });
  });
});
test("top level (parens)", () => {});
EOF
    cat >"$work/jest/src/other.test.js" <<'EOF'
test("other passes", () => {});
test("other throws", () => {
  throw new TypeError("boom");
});
EOF
    # In band, so that the files' order is fixed.
    record jest jest jest --ci --verbose -i
    # The rows of parse_log_jest_json pipe Jest's JSON through jq into `[STATUS] full name`
    # lines; stderr (Jest's progress) stays in the log as it does in theirs.
    record jest_json jest bash -c 'jest --ci --json -i | jq -r ".testResults[].assertionResults[]
        | select(.status == \"passed\" or .status == \"failed\")
        | \"[\" + (.status | ascii_upcase) + \"] \" + .fullName"'
fi
